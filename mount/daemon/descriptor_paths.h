// Two small helpers the inode table's files share (inode_table.cc, inode_path_fds.cc,
// name_change.cc): a descriptor's path, for messages, and closing the descriptors gathered under
// the table's lock once it is released.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

namespace gcfs::mount {

inline std::string fd_path(int fd) {
  char buf[4096];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

inline void close_all(const std::vector<int>& fds) {
  for (int f : fds) ::close(f);
}

}  // namespace gcfs::mount
