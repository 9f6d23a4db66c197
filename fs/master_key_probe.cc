#include "fs/master_key_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>

#include "crypto/errors.h"
#include "crypto/vault_config.h"
#include "fs/content/content_format.h"
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

// The chunk sizes under which the first chunk of the file at fd opens with keys, as the first
// format that claims the file (newest first) reads it. *pinned: only one size opens it because
// the file holds more than one chunk under it. Empty with *usable false: nothing to learn (an
// empty or header-only file, a hole, a damaged header).
std::vector<std::uint32_t> sizes_that_open(int fd, const KeyRing& keys, bool* usable, bool* pinned, int* format) {
  *usable = false;
  *pinned = false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return {};
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  for (const ContentFormat* f : content_formats()) {
    FirstChunkProbe p = f->probe_first_chunk(fd, size, keys);
    if (!p.mine) continue;
    *format = f->version();
    *usable = p.usable;
    *pinned = p.pinned;
    return std::move(p.sizes);
  }
  return {};
}

}  // namespace

MasterKeyProbe probe_master_key(const std::string& cipherdir, const KeyRing& keys, std::size_t max_files,
                                const DirIvSource* ivs) {
  MasterKeyProbe p;
  UniqueFd root(::open(cipherdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw UserError("cannot open CIPHERDIR " + cipherdir + ": " + std::strerror(errno));
  DirIv iv{};
  struct stat root_iv {};
  p.deterministic_names = ivs ? ivs->deterministic()
                              : ::fstatat(root.get(), kDirIvFileName, &root_iv, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
  if (DirIvSource(p.deterministic_names).read(root.get(), &iv, cipherdir) != 0)
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
