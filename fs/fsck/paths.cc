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

void Checker::push_path(Frame& child, const std::string& name, const std::optional<std::string>& pname) {
  child.crel_up = crel_.size();
  child.plain_up = plain_.size();
  if (!crel_.empty()) crel_ += '/';
  crel_ += name;
  if (!child.plain_known) return;  // plain_ stays as it is, unused below here
  if (plain_ != "/") plain_ += '/';
  plain_ += *pname;
}


void Checker::pop_path(const Frame& f) {
  crel_.resize(f.crel_up);
  plain_.resize(f.plain_up);
}

}  // namespace gcfs::fsck
