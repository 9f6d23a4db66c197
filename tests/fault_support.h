// Helpers for the fault tests: a directory vault in a temporary folder, filled through the fs/
// layer (NameMapping, ContentFile) exactly as the daemon lays it out, but without FUSE; tools to
// damage it on purpose; and a snapshot of a folder tree to prove that something wrote nothing.
#pragma once

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "crypto/cpu_engine.h"
#include "fs/content/content_file.h"
#include "fs/dir_iv.h"
#include "fs/vault.h"

namespace gcfs::testing {

// A folder under TMPDIR that is removed with everything in it, also when the test fails.
class TempDir {
 public:
  explicit TempDir(const char* tag = "gcfs-fault") {
    std::string tmpl = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/" + tag + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<std::uint8_t> pattern_bytes(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

inline std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_all(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  ::chmod(path.c_str(), 0600);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline void flip_bit(const std::string& path, std::uint64_t offset, int bit = 0) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  std::uint8_t b = 0;
  if (::pread(fd, &b, 1, static_cast<off_t>(offset)) != 1) throw std::runtime_error("flip_bit: offset past the end");
  b ^= static_cast<std::uint8_t>(1u << bit);
  if (::pwrite(fd, &b, 1, static_cast<off_t>(offset)) != 1) throw std::runtime_error("flip_bit: write failed");
  ::close(fd);
}

// Every path under root (relative), with its type, mode, size, content and xattrs: two equal
// snapshots mean nothing in the tree was created, removed, changed or chmod'ed.
inline std::map<std::string, std::string> snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto it = std::filesystem::recursive_directory_iterator(root); it != std::filesystem::recursive_directory_iterator();
       ++it) {
    const std::string p = it->path().string();
    struct stat st {};
    ::lstat(p.c_str(), &st);
    std::ostringstream s;
    s << std::oct << st.st_mode << std::dec << " " << st.st_size << " ";
    if (S_ISREG(st.st_mode)) {
      auto bytes = read_all(p);
      s.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    } else if (S_ISLNK(st.st_mode)) {
      s << std::filesystem::read_symlink(it->path()).string();
    }
    char names[4096];
    ssize_t n = ::llistxattr(p.c_str(), names, sizeof names);
    if (n > 0) s << " xattrs:" << std::string(names, static_cast<std::size_t>(n));
    out[p.substr(root.size())] = s.str();
  }
  return out;
}

// A vault with a small chunk size and cheap scrypt, filled through the fs/ layer.
class TestVault {
 public:
  static constexpr const char* kPassword = "correct horse battery staple";
  static constexpr std::uint32_t kChunk = 4096;

  // format: the content format; 0 takes GPUCRYPTFS_TEST_FORMAT, or init's default when unset.
  // deterministic_names: init --deterministic-names (no directory IV files).
  explicit TestVault(const std::string& cipherdir, int format = 0, bool deterministic_names = false)
      : dir_(cipherdir), engine_(2) {
    std::filesystem::create_directories(dir_);
    if (format == 0) {
      const char* f = std::getenv("GPUCRYPTFS_TEST_FORMAT");
      format = f && *f ? std::atoi(f) : kDefaultDirectoryFormat;
    }
    Vault::create(dir_, kPassword, kChunk, ScryptParams{10, 8, 1}, nullptr, "", kConfigFileName, format,
                  KeySlotKind::Password, 0, deterministic_names);
    vault_ = Vault::open(dir_, Vault::load_config(dir_), kPassword);
  }

  Vault& vault() { return *vault_; }
  ChunkEngine& engine() { return engine_; }
  const std::string& dir() const { return dir_; }

  // The ciphertext path (relative to CIPHERDIR) of a plaintext path "/a/b".
  std::string cipher_rel(const std::string& plain) {
    std::string rel;
    for (const auto& part : split(plain)) {
      DiskName n = disk_name(rel, part);
      rel = rel.empty() ? n.entry : rel + "/" + n.entry;
    }
    return rel;
  }
  std::string cipher_path(const std::string& plain) { return dir_ + "/" + cipher_rel(plain); }

  void mkdir(const std::string& plain) {
    auto [parent, name] = parent_and_name(plain);
    DiskName n = disk_name(parent, name);
    const std::string p = abs(parent) + "/" + n.entry;
    if (::mkdir(p.c_str(), 0755) != 0) throw std::runtime_error("mkdir " + p);
    int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (vault_->dir_ivs().create(fd, nullptr) != 0) throw std::runtime_error("create_dir_iv " + p);
    ::close(fd);
    name_file(parent, n);
  }

  void write_file(const std::string& plain, const std::vector<std::uint8_t>& data, std::uint64_t offset = 0) {
    auto [parent, name] = parent_and_name(plain);
    DiskName n = disk_name(parent, name);
    const std::string p = abs(parent) + "/" + n.entry;
    int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("open " + p);
    ContentFile f(fd, vault_->layout(), engine_, vault_->keys(), p);
    if (!data.empty() && f.write(offset, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
      throw std::runtime_error("write " + p);
    ::close(fd);
    name_file(parent, n);
  }

  void symlink(const std::string& plain, const std::string& target) {
    auto [parent, name] = parent_and_name(plain);
    DiskName n = disk_name(parent, name);
    const std::string p = abs(parent) + "/" + n.entry;
    if (::symlink(vault_->names().encrypt_symlink(target).c_str(), p.c_str()) != 0) throw std::runtime_error("symlink " + p);
    name_file(parent, n);
  }

  // A symlink in the long-target form (its target in a gcfs.longtarget.* file beside it), as the
  // mount writes one the backing filesystem refuses in the short form. Returns the link on disk.
  std::string long_symlink(const std::string& plain, const std::string& target) {
    auto [parent, name] = parent_and_name(plain);
    DiskName n = disk_name(parent, name);
    const StoredLink l = vault_->names().store_symlink(target, true);
    int fd = ::open(abs(parent).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int rc = NameMapping::write_long_target(fd, l);
    ::close(fd);
    if (rc != 0) throw std::runtime_error("write_long_target " + plain);
    const std::string p = abs(parent) + "/" + n.entry;
    if (::symlink(l.link.c_str(), p.c_str()) != 0) throw std::runtime_error("symlink " + p);
    name_file(parent, n);
    return l.link;
  }

  // False when the backing filesystem does not store user xattrs.
  bool set_xattr(const std::string& plain, const std::string& name, const std::string& value) {
    const std::string p = cipher_path(plain);
    auto stored = vault_->names().encrypt_xattr_name(name);
    auto sealed = vault_->names().encrypt_xattr_value(
        *stored, {reinterpret_cast<const std::uint8_t*>(value.data()), value.size()});
    return ::lsetxattr(p.c_str(), stored->c_str(), sealed.data(), sealed.size(), 0) == 0;
  }

  // Reads plaintext through a fresh ContentFile, as a mount would.
  ssize_t read(const std::string& plain, std::uint64_t off, std::size_t len, std::vector<std::uint8_t>* out) {
    const std::string p = cipher_path(plain);
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ContentFile f(fd, vault_->layout(), engine_, vault_->keys(), p);
    out->assign(len, 0);
    ssize_t n = f.read(off, len, out->data());
    if (n >= 0) out->resize(static_cast<std::size_t>(n));
    ::close(fd);
    return n;
  }

  // Disk offset of chunk k in a ciphertext file (format 1: where its nonce starts).
  std::uint64_t chunk_offset(std::uint64_t k) const { return vault_->layout().disk_offset(k); }
  const ChunkLayout& layout() const { return vault_->layout(); }
  // Where chunk k's ciphertext lies in a file of plain_size bytes, in either format.
  std::uint64_t data_offset(std::uint64_t k, std::uint64_t plain_size) const {
    return vault_->layout().data_offset(k, plain_size);
  }
  // The byte ranges {offset, length} that chunk k of a file of plain_size bytes takes on disk:
  // format 1, one (nonce | ciphertext | tag); format 2, its entry and its data block.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> chunk_ranges(std::uint64_t k, std::uint64_t plain_size) const {
    const ChunkLayout& L = vault_->layout();
    const std::uint64_t len = L.chunk_plain_len(k, plain_size);
    if (!L.aligned()) return {{L.disk_offset(k), len + kChunkOverhead}};
    return {{L.nonce_offset(k), kChunkOverhead}, {L.data_offset(k, plain_size), len}};
  }

 private:
  static std::vector<std::string> split(const std::string& plain) {
    std::vector<std::string> parts;
    std::stringstream ss(plain);
    for (std::string part; std::getline(ss, part, '/');)
      if (!part.empty()) parts.push_back(part);
    return parts;
  }
  std::pair<std::string, std::string> parent_and_name(const std::string& plain) {
    auto parts = split(plain);
    std::string name = parts.back();
    parts.pop_back();
    std::string parent_plain;
    for (auto& p : parts) parent_plain += "/" + p;
    return {cipher_rel(parent_plain), name};
  }
  std::string abs(const std::string& rel) const { return rel.empty() ? dir_ : dir_ + "/" + rel; }
  DiskName disk_name(const std::string& parent_rel, const std::string& name) {
    int fd = ::open(abs(parent_rel).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DirIv iv{};
    int rc = vault_->dir_ivs().read(fd, &iv, abs(parent_rel));
    ::close(fd);
    if (rc != 0) throw std::runtime_error("read_dir_iv " + parent_rel);
    return vault_->names().to_disk(name, iv);
  }
  void name_file(const std::string& parent_rel, const DiskName& n) {
    int fd = ::open(abs(parent_rel).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    NameMapping::write_name_file(fd, n);
    ::close(fd);
  }

  std::string dir_;
  CpuEngine engine_;
  std::unique_ptr<Vault> vault_;
};

}  // namespace gcfs::testing
