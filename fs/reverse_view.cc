#include "fs/reverse_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fs/dir_iv.h"
#include "fs/file_header.h"
#include "fs/name_mapping.h"
#include "fs/safe_open.h"

namespace gcfs {
namespace {

std::pair<std::string, std::string> split_path(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// This thread's buffer for the chunks of one read, from the engine (page-locked with the gpu
// engine, so chunks go to the GPU without a staging copy). Kept and grown in powers of two:
// pinning memory takes milliseconds, too slow for every request. Wiped by the engine when freed.
std::uint8_t* chunk_scratch(ChunkEngine& engine, std::size_t n) {
  struct Slot {
    const ChunkEngine* owner = nullptr;
    HostBuffer buf;
  };
  thread_local Slot s;
  if (s.owner != &engine || s.buf.size() < n) {
    std::size_t size = std::size_t{64} << 10;
    while (size < n) size *= 2;
    s.buf = engine.allocate_io_buffer(size);
    s.owner = &engine;
  }
  return s.buf.data();
}

bool same_time(const struct timespec& a, const struct timespec& b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

}  // namespace

ReverseView::ReverseView(int root_fd, const Vault& vault, ChunkEngine& engine, std::string config_json)
    : root_(root_fd), vault_(vault), engine_(engine), derive_(vault.keys()), config_json_(std::move(config_json)) {}

int ReverseView::open_dir(const std::string& rel, UniqueFd* fd) {
  if (rel.empty()) {
    int f = ::openat(root_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f < 0) return -errno;
    *fd = UniqueFd(f);
    return 0;
  }
  OpenResult r = open_beneath(root_.get(), rel, FileType::Directory, O_RDONLY);
  if (!r) return r.error == EUCLEAN ? -ENOTDIR : -r.error;
  *fd = std::move(r.fd);
  return 0;
}

StoredLink ReverseView::stored_link(const std::string& path, const std::string& target) const {
  std::string encoded = vault_.names().encrypt_symlink(target, derive_.symlink_nonce(path, target));
  // Past what a link holds, the long form; forward mode takes it only where the backing
  // filesystem refuses the short one, and reads both.
  if (encoded.size() > kMaxSymlinkTargetBytes) return NameMapping::long_link(std::move(encoded));
  StoredLink l;
  l.link = encoded;
  l.encoded = std::move(encoded);
  return l;
}

int ReverseView::list(const std::string& rel, std::vector<ReverseEntry>* out, struct stat* dir_st) {
  std::shared_ptr<const Listing> l;
  if (int rc = listing(rel, &l, dir_st); rc < 0) return rc;
  *out = l->entries;
  return 0;
}

int ReverseView::listing(const std::string& rel, std::shared_ptr<const Listing>* out, struct stat* dir_st) {
  UniqueFd dir;
  if (int rc = open_dir(rel, &dir); rc < 0) return rc;
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0) return -errno;
  if (dir_st) *dir_st = st;
  {
    std::lock_guard lk(mu_);
    auto it = cache_.find(rel);
    if (it != cache_.end() && it->second.ino == st.st_ino && same_time(it->second.ctime, st.st_ctim) &&
        same_time(it->second.mtime, st.st_mtim)) {
      *out = it->second.listing;
      return 0;
    }
  }
  std::vector<ReverseEntry> entries;
  const DirIv iv = name_iv(rel);
  // A view with deterministic names shows no IV files, as a forward vault of it keeps none.
  if (!vault_.dir_ivs().deterministic())
    entries.push_back({ReverseEntry::Kind::DirIv, kDirIvFileName, "", std::string(iv.begin(), iv.end())});
  if (rel.empty()) entries.push_back({ReverseEntry::Kind::Config, kConfigFileName, "", config_json_});
  const int lfd = ::dup(dir.get());
  if (lfd < 0) return -errno;
  DIR* d = ::fdopendir(lfd);
  if (!d) {
    const int e = errno;
    ::close(lfd);
    return -e;
  }
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || (rel.empty() && name == kReverseConfigName)) continue;
    if (!exclusions_.empty()) {
      bool is_dir = e->d_type == DT_DIR;
      struct stat est {};
      if (e->d_type == DT_UNKNOWN && ::fstatat(dir.get(), name.c_str(), &est, AT_SYMLINK_NOFOLLOW) == 0)
        is_dir = S_ISDIR(est.st_mode);
      if (exclusions_.excluded(join(rel, name), is_dir)) continue;
    }
    const DiskName dn = vault_.names().to_disk(name, iv);
    entries.push_back({ReverseEntry::Kind::Plain, dn.entry, name, "", static_cast<mode_t>(DTTOIF(e->d_type))});
    if (dn.is_long) entries.push_back({ReverseEntry::Kind::LongNameFile, dn.name_file(), name, dn.encoded});
    if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
      std::string target(kMaxSymlinkTargetBytes + 1, '\0');
      const ssize_t n = ::readlinkat(dir.get(), name.c_str(), target.data(), target.size());
      if (n < 0) continue;  // not a symlink (DT_UNKNOWN), or gone
      target.resize(static_cast<std::size_t>(n));
      StoredLink l = stored_link(join(rel, name), target);
      if (l.is_long) entries.push_back({ReverseEntry::Kind::LongTargetFile, l.link, name, l.encoded});
    }
  }
  ::closedir(d);
  auto l = std::make_shared<Listing>();
  l->entries = std::move(entries);
  for (std::size_t i = 0; i < l->entries.size(); ++i) l->by_name.emplace(l->entries[i].cipher_name, i);
  std::lock_guard lk(mu_);
  if (cache_.size() > 4096) cache_.clear();  // a bound, not an LRU: listings are cheap to redo
  cache_[rel] = Cached{st.st_ctim, st.st_mtim, st.st_ino, l};
  *out = std::move(l);
  return 0;
}

int ReverseView::find(const std::string& rel, std::string_view cipher_name, ReverseEntry* out, struct stat* dir_st) {
  std::shared_ptr<const Listing> l;
  if (int rc = listing(rel, &l, dir_st); rc < 0) return rc;
  auto it = l->by_name.find(std::string(cipher_name));
  if (it == l->by_name.end()) return -ENOENT;
  *out = l->entries[it->second];
  return 0;
}

int ReverseView::stat(const std::string& rel, const ReverseEntry& e, struct stat* st) {
  UniqueFd dir;
  if (int rc = open_dir(rel, &dir); rc < 0) return rc;
  if (e.kind != ReverseEntry::Kind::Plain) {
    // A file of the view alone: read-only, with the directory's owner and times.
    if (::fstat(dir.get(), st) != 0) return -errno;
    st->st_mode = S_IFREG | (e.kind == ReverseEntry::Kind::Config ? 0400 : 0440);
    st->st_nlink = 1;
    st->st_size = static_cast<off_t>(e.content.size());
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
  }
  if (::fstatat(dir.get(), e.plain_name.c_str(), st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  if (S_ISREG(st->st_mode)) {
    st->st_size = static_cast<off_t>(vault_.layout().cipher_size(static_cast<std::uint64_t>(st->st_size)));
  } else if (S_ISLNK(st->st_mode)) {
    std::string link;
    if (int rc = link_of(join(rel, e.plain_name), &link); rc < 0) return rc;
    st->st_size = static_cast<off_t>(link.size());
  }
  return 0;
}

int ReverseView::link_of(const std::string& path, std::string* link) {
  auto [rel, name] = split_path(path);
  UniqueFd dir;
  if (int rc = open_dir(rel, &dir); rc < 0) return rc;
  std::string target(kMaxSymlinkTargetBytes + 1, '\0');
  const ssize_t n = ::readlinkat(dir.get(), name.c_str(), target.data(), target.size());
  if (n < 0) return -errno;
  target.resize(static_cast<std::size_t>(n));
  *link = stored_link(path, target).link;
  return 0;
}

int ReverseView::encrypt_path(const std::string& plain, std::string* out) {
  out->clear();
  std::string rel;
  std::size_t start = 0;
  while (start < plain.size()) {
    std::size_t slash = plain.find('/', start);
    if (slash == std::string::npos) slash = plain.size();
    const std::string name = plain.substr(start, slash - start);
    if (name.size() > kMaxNameBytes) return -ENAMETOOLONG;
    const DiskName dn = vault_.names().to_disk(name, name_iv(rel));
    ReverseEntry e;
    if (int rc = find(rel, dn.entry, &e); rc < 0) return rc;  // not there, or excluded
    *out += (out->empty() ? "" : "/") + dn.entry;
    rel = join(rel, name);
    start = slash + 1;
  }
  return 0;
}

int ReverseView::decrypt_path(const std::string& cipher, std::string* out) {
  out->clear();
  std::size_t start = 0;
  while (start < cipher.size()) {
    std::size_t slash = cipher.find('/', start);
    if (slash == std::string::npos) slash = cipher.size();
    ReverseEntry e;
    if (int rc = find(*out, cipher.substr(start, slash - start), &e); rc < 0) return rc;
    // The view's own files (IVs, config, long-name files) have no plaintext path.
    if (e.kind != ReverseEntry::Kind::Plain) return -EINVAL;
    *out = join(*out, e.plain_name);
    start = slash + 1;
  }
  return 0;
}

int ReverseView::statfs(struct statvfs* sv) { return ::fstatvfs(root_.get(), sv) == 0 ? 0 : -errno; }

int ReverseView::open_file(const std::string& path, UniqueFd* fd) {
  OpenResult r = open_beneath(root_.get(), path, FileType::Regular, O_RDONLY);
  if (!r) return r.error == EUCLEAN || r.error == ELOOP ? -EACCES : -r.error;
  *fd = std::move(r.fd);
  return 0;
}

ssize_t ReverseView::read(int fd, const std::string& path, std::uint64_t off, std::size_t len, std::uint8_t* out) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return -errno;
  const ChunkLayout& layout = vault_.layout();
  const std::uint64_t plain_size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t cipher_size = layout.cipher_size(plain_size);
  if (off >= cipher_size || len == 0) return 0;
  const std::uint64_t end = std::min<std::uint64_t>(off + len, cipher_size);
  const FileId id = derive_.file_id(path);
  // The header.
  if (off < kFileHeaderBytes) {
    const auto h = FileHeader{id}.encode();
    std::memcpy(out, h.data() + off, std::min<std::uint64_t>(end, kFileHeaderBytes) - off);
  }
  if (end <= kFileHeaderBytes) return static_cast<ssize_t>(end - off);
  // The chunks the range touches, sealed in one batch.
  const std::uint64_t d = layout.disk_chunk_size();
  const std::uint64_t first = (std::max<std::uint64_t>(off, kFileHeaderBytes) - kFileHeaderBytes) / d;
  const std::uint64_t last = (end - 1 - kFileHeaderBytes) / d;
  const std::size_t n = static_cast<std::size_t>(last - first + 1);
  const std::size_t c = static_cast<std::size_t>(layout.chunk_size());
  std::uint8_t* const buf = chunk_scratch(engine_, n * c);
  std::vector<ChunkOp> ops(n);
  std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads(n);
  const ChunkKey key = vault_.keys().content_key(id);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t k = first + i;
    const std::size_t plain_len = static_cast<std::size_t>(layout.chunk_plain_len(k, plain_size));
    std::uint8_t* p = buf + i * c;
    std::size_t got = 0;
    while (got < plain_len) {
      const ssize_t r = ::pread(fd, p + got, plain_len - got, static_cast<off_t>(layout.chunk_start(k) + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -errno;
      if (r == 0) break;  // shrunk while read: the rest reads as zeros, as the size promised
      got += static_cast<std::size_t>(r);
    }
    std::memset(p + got, 0, plain_len - got);
    aads[i] = chunk_aad(id, k);
    ops[i].key = &key;
    ops[i].nonce = derive_.chunk_nonce(id, k, {p, plain_len});
    ops[i].aad = aads[i].data();
    ops[i].aad_len = aads[i].size();
    ops[i].in = p;
    ops[i].out = p;
    ops[i].len = plain_len;
  }
  engine_.seal(ops);
  std::vector<std::uint8_t> disk;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t k = first + i;
    const std::uint64_t start = layout.disk_offset(k);
    disk.resize(kChunkNonceOnDisk + ops[i].len + kChunkTagOnDisk);
    std::copy(ops[i].nonce.begin(), ops[i].nonce.end(), disk.begin());
    std::memcpy(disk.data() + kChunkNonceOnDisk, ops[i].out, ops[i].len);
    std::copy(ops[i].tag.begin(), ops[i].tag.end(), disk.begin() + kChunkNonceOnDisk + ops[i].len);
    const std::uint64_t from = std::max(off, start), to = std::min<std::uint64_t>(end, start + disk.size());
    if (from < to) std::memcpy(out + (from - off), disk.data() + (from - start), to - from);
  }
  return static_cast<ssize_t>(end - off);
}

}  // namespace gcfs
