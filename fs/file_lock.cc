#include "fs/file_lock.h"

#include <sys/file.h>

#include <cerrno>
#include <thread>

namespace gcfs {

int flock_with_grace(int fd, int operation, std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    if (::flock(fd, operation | LOCK_NB) == 0) return 0;
    const int e = errno;
    if (e == EINTR) continue;
    if (e != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace gcfs
