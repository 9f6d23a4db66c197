// Small helpers the fsck steps share: paths for messages, directory listings, what is skipped.
#include "fs/fsck/checker.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "crypto/base64url.h"
#include "fs/chunk_auth.h"
#include "fs/config_file.h"

namespace gcfs::fsck {

std::string join(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }
std::string plain_join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}


std::optional<std::vector<std::string>> list_dir(int dirfd) {
  int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return std::nullopt;
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return std::nullopt;
  }
  ::rewinddir(d);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}


std::string describe_runs(const std::vector<std::uint64_t>& chunks) { return describe_chunk_runs(chunks, 8); }

bool is_leftover_temp(std::string_view name) {
  // Atomic writes of the config and of directory IVs go through NAME.tmp and a rename; a crash
  // between the two leaves the temporary behind, which is harmless.
  return name == std::string(kConfigFileName) + ".tmp" || name == std::string(kDirIvFileName) + ".tmp";
}


bool skipped_entry(std::string_view name, bool at_root) {
  if (at_root && (name == kConfigFileName || name == kLostFoundDirName || name == kJournalFileName)) return true;
  return name == kDirIvFileName || is_leftover_temp(name);
}


std::uint64_t bytes_to_check(const struct stat& st) {
  const std::uint64_t allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
  return std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), allocated);
}


std::string describe(const OpenResult& r) {
  if (r.error == EUCLEAN || r.error == ELOOP || r.error == EXDEV) return r.why();
  return "cannot be opened (" + r.why() + ")";
}


std::string sha256_base64url(std::string_view s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr) != 1) throw std::runtime_error("SHA-256 failed");
  return base64url_encode({md, len});
}

std::string dir_crel(const std::vector<Frame>& frames) {
  std::string out;
  for (std::size_t i = 1; i < frames.size(); ++i) out = join(out, frames[i].name);
  return out;
}


std::optional<std::string> dir_plain(const std::vector<Frame>& frames) {
  if (!frames.back().plain_known) return std::nullopt;
  std::string out = "/";
  for (std::size_t i = 1; i < frames.size(); ++i) out = plain_join(out, frames[i].plain_name);
  return out;
}

}  // namespace gcfs::fsck
