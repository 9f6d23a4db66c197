// The generation node IDs of this mount are handed out with (node_generation.h).
#include "mount/daemon/node_generation.h"

#include <sys/random.h>

namespace gcfs::mount {

std::uint64_t node_generation() {
  static const std::uint64_t generation = [] {
    std::uint32_t g = 0;
    while (g == 0) {
      // The kernel keeps 32 bits of it (inode->i_generation); getrandom of 4 bytes never blocks
      // once the pool is up, and a daemon starts long after that.
      if (::getrandom(&g, sizeof g, 0) != static_cast<ssize_t>(sizeof g)) g = 0;
    }
    return static_cast<std::uint64_t>(g);
  }();
  return generation;
}

}  // namespace gcfs::mount
