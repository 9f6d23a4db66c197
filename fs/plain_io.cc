#include "fs/plain_io.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace gcfs {

ssize_t pread_full(int fd, void* buf, std::size_t len, std::uint64_t off, std::size_t enough) {
  std::size_t done = 0;
  while (done < len && done < enough) {
    ssize_t n = ::pread(fd, static_cast<char*>(buf) + done, len - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

ssize_t pwrite_full(int fd, const void* buf, std::size_t len, std::uint64_t off) {
  std::size_t done = 0;
  while (done < len) {
    ssize_t n = ::pwrite(fd, static_cast<const char*>(buf) + done, len - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -EIO;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

ssize_t pwrite2_full(int fd, const std::uint8_t* a, std::size_t len_a, const std::uint8_t* b, std::size_t len_b,
                     std::uint64_t off) {
  iovec iov[2] = {{const_cast<std::uint8_t*>(a), len_a}, {const_cast<std::uint8_t*>(b), len_b}};
  ssize_t n;
  do n = ::pwritev(fd, iov, 2, static_cast<off_t>(off));
  while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  const std::size_t done = static_cast<std::size_t>(n);
  if (done >= len_a + len_b) return n;
  // Short: finish with plain pwrites.
  if (done < len_a) {
    ssize_t w = pwrite_full(fd, a + done, len_a - done, off + done);
    if (w < 0) return w;
    w = pwrite_full(fd, b, len_b, off + len_a);
    return w < 0 ? w : static_cast<ssize_t>(len_a + len_b);
  }
  ssize_t w = pwrite_full(fd, b + (done - len_a), len_b - (done - len_a), off + done);
  return w < 0 ? w : static_cast<ssize_t>(len_a + len_b);
}

}  // namespace gcfs
