// The descriptor budget of the directory daemon and its caches (fd_limit.h).
#include "mount/daemon/fd_limit.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>

namespace gcfs::mount {
namespace {

rlim_t kernel_max_open_files() {
  std::ifstream in("/proc/sys/fs/nr_open");
  unsigned long long n = 0;
  return (in >> n) ? static_cast<rlim_t>(n) : 0;
}

}  // namespace

DescriptorBudget descriptor_budget(rlim_t available) {
  const std::size_t quarter =
      available == RLIM_INFINITY ? std::size_t{1} << 20 : static_cast<std::size_t>(available / 4);
  return {std::clamp<std::size_t>(quarter, 8, 65536), std::clamp<std::size_t>(quarter, 8, 8192)};
}

std::size_t descriptors_in_use() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  std::size_t n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n > 0 ? n - 1 : 0;  // less the descriptor of the listing itself
}

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
