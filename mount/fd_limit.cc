#include "mount/fd_limit.h"

#include <fstream>

namespace gcfs::mount {
namespace {

rlim_t kernel_max_open_files() {
  std::ifstream in("/proc/sys/fs/nr_open");
  unsigned long long n = 0;
  return (in >> n) ? static_cast<rlim_t>(n) : 0;
}

}  // namespace

rlim_t raise_open_file_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  const rlim_t kernel_max = kernel_max_open_files();
  if (kernel_max > lim.rlim_max) {
    rlimit wider{kernel_max, kernel_max};
    if (::setrlimit(RLIMIT_NOFILE, &wider) == 0) return kernel_max;  // needs CAP_SYS_RESOURCE
  }
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

}  // namespace gcfs::mount
