#include "mount/cli/malloc_arenas.h"

#include <malloc.h>

#include <cstdlib>

namespace gcfs::cli {

void limit_malloc_arenas() {
  if (std::getenv("MALLOC_ARENA_MAX")) return;  // glibc has read it already: the user's choice
  ::mallopt(M_ARENA_MAX, kMallocArenas);
}

}  // namespace gcfs::cli
