#include "fs/dir_iv.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "crypto/random.h"
#include "fs/content_file.h"
#include "fs/log.h"

namespace gcfs {

int read_dir_iv(int dirfd, DirIv* iv, const std::string& label) {
  int fd = ::openat(dirfd, kDirIvFileName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int e = errno;
    log::error(label + "/" + kDirIvFileName + ": cannot open the directory IV: " + std::strerror(e) +
               " (names in this directory cannot be read or written)");
    return e == ENOENT ? -EIO : -e;
  }
  std::uint8_t buf[kDirIvBytes + 1];
  ssize_t n = pread_full(fd, buf, sizeof buf, 0);
  ::close(fd);
  if (n < 0) return static_cast<int>(n);
  if (static_cast<std::size_t>(n) != kDirIvBytes) {
    log::error(label + "/" + kDirIvFileName + ": directory IV has " + std::to_string(n) + " bytes, not " +
               std::to_string(kDirIvBytes) + " (damaged)");
    return -EIO;
  }
  std::copy(buf, buf + kDirIvBytes, iv->begin());
  return 0;
}

int create_dir_iv(int dirfd, DirIv* out, const DirIv* given) {
  DirIv iv{};
  if (given) iv = *given;
  else random_bytes(iv);
  // A temporary name and a rename: a crash never leaves a short IV file behind.
  const std::string tmp = kDirIvTempName;
  ::unlinkat(dirfd, tmp.c_str(), 0);
  int fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0440);
  if (fd < 0) return -errno;
  ssize_t n = pwrite_full(fd, iv.data(), iv.size(), 0);
  int rc = n < 0 ? static_cast<int>(n) : 0;
  if (rc == 0 && ::fsync(fd) != 0) rc = -errno;
  ::close(fd);
  if (rc == 0 && ::renameat(dirfd, tmp.c_str(), dirfd, kDirIvFileName) != 0) rc = -errno;
  if (rc != 0) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return rc;
  }
  if (out) *out = iv;
  return 0;
}

}  // namespace gcfs
