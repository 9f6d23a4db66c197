#include "fs/master_key_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>

#include "crypto/aes_gcm.h"
#include "crypto/errors.h"
#include "crypto/vault_config.h"
#include "fs/chunk_layout.h"
#include "fs/dir_iv.h"
#include "fs/file_header.h"
#include "fs/name_mapping.h"
#include "fs/safe_open.h"
#include "fs/unique_fd.h"

namespace gcfs {
namespace {

// The entries of an open directory (a duplicate descriptor is read, so dirfd stays usable).
std::vector<std::string> list_entries(int dirfd) {
  std::vector<std::string> out;
  const int dup = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return out;
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return out;
  }
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

// Content files and directories carry encrypted names (long ones as gcfs.longname.*); every other
// name with a dot is the vault's own (IVs, .name files, long targets, the config and journal).
bool is_content_entry(const std::string& e) { return !is_internal_entry(e) || is_long_name_entry(e); }

std::vector<std::uint32_t> all_chunk_sizes() {
  std::vector<std::uint32_t> out;
  for (std::uint32_t c = kMinChunkSize; c <= kMaxChunkSize; c *= 2) out.push_back(c);
  return out;
}

// The chunk sizes under which the first chunk of the file at fd opens with keys. *pinned: only
// one size opens it because the file holds more than one chunk under it. Empty with *usable
// false: nothing to learn (an empty or header-only file, a hole, a damaged header).
std::vector<std::uint32_t> sizes_that_open_v2(int fd, std::uint64_t size, const FileHeader& header, const KeyRing& keys,
                                              bool* usable, bool* pinned);

std::vector<std::uint32_t> sizes_that_open(int fd, const KeyRing& keys, bool* usable, bool* pinned, int* format) {
  *usable = false;
  *pinned = false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return {};
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  {
    // Format 2 (its header says so): the first chunk's entry and data lie elsewhere.
    std::array<std::uint8_t, kFileHeaderBytes> raw{};
    if (size > kV2InlineOffset && ::pread(fd, raw.data(), raw.size(), 0) == static_cast<ssize_t>(raw.size()))
      if (const auto h2 = FileHeader::decode(raw, 2)) {
        *format = 2;
        return sizes_that_open_v2(fd, size, *h2, keys, usable, pinned);
      }
  }
  *format = 1;
  if (size <= kFileHeaderBytes + kChunkOverhead) return {};
  const std::uint64_t rest = size - kFileHeaderBytes;
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, kFileHeaderBytes + kMaxChunkSize + kChunkOverhead)));
  std::size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got != buf.size()) return {};
  const auto header = FileHeader::decode(std::span(buf.data(), kFileHeaderBytes));
  if (!header) return {};
  const std::uint8_t* first = buf.data() + kFileHeaderBytes;
  if (std::all_of(first, first + kChunkOverhead, [](std::uint8_t b) { return b == 0; })) return {};  // a hole
  *usable = true;
  const ChunkKey key = keys.content_key(header->id);
  const auto aad = chunk_aad(header->id, 0);
  std::vector<std::uint32_t> out;
  std::vector<std::uint8_t> plain;
  for (std::uint32_t c : all_chunk_sizes()) {
    const std::uint64_t record = std::min<std::uint64_t>(rest, c + kChunkOverhead);
    const std::size_t body = static_cast<std::size_t>(record - kChunkOverhead);
    plain.resize(body);
    if (gcm_open(key.bytes, std::span(first, kChunkNonceOnDisk), aad, std::span(first + kChunkNonceOnDisk, body),
                 std::span(first + kChunkNonceOnDisk + body, kChunkTagOnDisk), plain.data()))
      out.push_back(c);
  }
  secure_wipe(plain.data(), plain.size());
  *pinned = out.size() == 1 && rest > out.front() + kChunkOverhead;
  return out;
}

std::vector<std::uint32_t> sizes_that_open_v2(int fd, std::uint64_t size, const FileHeader& header, const KeyRing& keys,
                                              bool* usable, bool* pinned) {
  std::array<std::uint8_t, kChunkOverhead> entry{};
  if (::pread(fd, entry.data(), entry.size(), static_cast<off_t>(kV2EntriesOffset)) != static_cast<ssize_t>(entry.size()))
    return {};
  if (std::all_of(entry.begin(), entry.end(), [](std::uint8_t b) { return b == 0; })) return {};  // a hole
  // Inline (one block): its only chunk lies at 128 whatever the chunk size; else chunk 0 lies at
  // 4096 and is C bytes long, or the rest of a file shorter than that.
  const bool is_inline = size <= kV2BlockBytes;
  const std::uint64_t at = is_inline ? kV2InlineOffset : kV2BlockBytes;
  const std::uint64_t rest = size - at;
  std::vector<std::uint8_t> data(static_cast<std::size_t>(std::min<std::uint64_t>(rest, kMaxChunkSize)));
  std::size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(at + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got != data.size()) return {};
  if (std::all_of(data.begin(), data.end(), [](std::uint8_t b) { return b == 0; })) return {};  // a hole
  *usable = true;
  const ChunkKey key = keys.content_key(header.id);
  const auto aad = chunk_aad(header.id, 0);
  std::vector<std::uint32_t> out;
  std::vector<std::uint8_t> plain;
  for (std::uint32_t c : all_chunk_sizes()) {
    const std::size_t body = static_cast<std::size_t>(std::min<std::uint64_t>(rest, c));
    plain.resize(body);
    if (gcm_open(key.bytes, std::span(entry.data(), kChunkNonceOnDisk), aad, std::span(data.data(), body),
                 std::span(entry.data() + kChunkNonceOnDisk, kChunkTagOnDisk), plain.data()))
      out.push_back(c);
  }
  secure_wipe(plain.data(), plain.size());
  *pinned = !is_inline && out.size() == 1 && rest > out.front();
  return out;
}

}  // namespace

MasterKeyProbe probe_master_key(const std::string& cipherdir, const KeyRing& keys, std::size_t max_files) {
  MasterKeyProbe p;
  UniqueFd root(::open(cipherdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw UserError("cannot open CIPHERDIR " + cipherdir + ": " + std::strerror(errno));
  DirIv iv{};
  if (read_dir_iv(root.get(), &iv, cipherdir) != 0)
    throw CorruptData(cipherdir + "/" + kDirIvFileName + " is missing or damaged: the root's names cannot be read");
  const NameMapping names(keys);
  for (const auto& e : list_entries(root.get())) {
    if (!is_content_entry(e)) continue;
    if (names.to_plain(root.get(), e, iv)) ++p.names_ok;
    else ++p.names_bad;
  }

  std::map<std::uint32_t, std::size_t> votes;
  std::deque<UniqueFd> dirs;
  dirs.push_back(std::move(root));
  std::size_t visited = 0;
  bool pinned = false;
  while (!dirs.empty() && p.files_ok + p.files_bad < max_files && !pinned && visited < 100000) {
    UniqueFd dir = std::move(dirs.front());
    dirs.pop_front();
    for (const auto& e : list_entries(dir.get())) {
      if (++visited >= 100000 || pinned || p.files_ok + p.files_bad >= max_files) break;
      if (!is_content_entry(e)) continue;
      struct stat st {};
      if (::fstatat(dir.get(), e.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        OpenResult d = open_beneath(dir.get(), e, FileType::Directory, O_RDONLY);
        if (d && dirs.size() < 4096) dirs.push_back(std::move(d.fd));
        continue;
      }
      if (!S_ISREG(st.st_mode)) continue;
      OpenResult f = open_beneath(dir.get(), e, FileType::Regular, O_RDONLY);
      if (!f) continue;
      bool usable = false, file_pins = false;
      int format = 1;
      const auto sizes = sizes_that_open(f.fd.get(), keys, &usable, &file_pins, &format);
      if (!usable) continue;
      ++(format == 2 ? p.format2_files : p.format1_files);
      if (sizes.empty()) {
        ++p.files_bad;
        continue;
      }
      ++p.files_ok;
      for (auto c : sizes) ++votes[c];
      if (file_pins) {
        pinned = true;
        p.chunk_size_pinned = true;
        p.chunk_sizes = sizes;
      }
    }
  }
  if (!pinned) {
    std::size_t best = 0;
    for (const auto& [c, n] : votes) best = std::max(best, n);
    for (const auto& [c, n] : votes)
      if (n == best) p.chunk_sizes.push_back(c);
    if (p.chunk_sizes.empty()) p.chunk_sizes = all_chunk_sizes();
  }
  return p;
}

}  // namespace gcfs
