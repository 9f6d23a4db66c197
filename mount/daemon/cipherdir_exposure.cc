// Whether other users can reach CIPHERDIR under --allow-other (cipherdir_exposure.h).
#include "mount/daemon/cipherdir_exposure.h"

#include <sys/stat.h>

#include <cstdio>
#include <vector>

namespace gcfs::mount {
namespace {

std::string octal_mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

}  // namespace

std::string cipherdir_exposure(const std::string& cipherdir, uid_t owner) {
  // "/", "/a", "/a/b", ..., cipherdir
  std::vector<std::string> chain{"/"};
  for (std::size_t pos = 1; pos <= cipherdir.size(); ++pos)
    if (pos == cipherdir.size() || cipherdir[pos] == '/') {
      if (pos > 1 && cipherdir[pos - 1] != '/') chain.push_back(cipherdir.substr(0, pos));
    }
  bool reachable = true;  // so far, every folder searchable by group or others
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const std::string& p = chain[i];
    const bool is_cipherdir = i + 1 == chain.size();
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return "";  // the mount itself will say what is wrong
    const std::string what = (is_cipherdir ? "CIPHERDIR " : "") + p + " (mode " + octal_mode(st.st_mode) + ", owner uid " +
                             std::to_string(st.st_uid) + ")";
    if (st.st_uid != 0 && st.st_uid != owner) return what + " belongs to another user";
    const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (others_write && (is_cipherdir || !(st.st_mode & S_ISVTX))) return what + " is writable by group or others";
    reachable = reachable && (st.st_mode & (S_IXGRP | S_IXOTH)) != 0;
    if (is_cipherdir && reachable && owner == 0) return what + " can be entered by group or others, as can every folder above it";
  }
  return "";
}

}  // namespace gcfs::mount
