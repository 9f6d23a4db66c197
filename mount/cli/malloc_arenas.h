// How many heaps glibc's malloc keeps (mallopt M_ARENA_MAX), set before any thread starts.
#pragma once

namespace gcfs::cli {

// At most kMallocArenas arenas, unless MALLOC_ARENA_MAX in the environment says otherwise. glibc
// gives each new thread its own arena, up to eight per core: a daemon's request threads then each
// hold their own heap, in which the inodes they made sit among the holes their requests' temporaries
// left, and those holes are reused by that thread alone. With 100,000 files that cost 0.6 KB of
// resident memory a file more than four arenas do (docs/BENCHMARKS.md, "Memory"); glibc's
// per-thread caches serve the small allocations of a request without taking an arena's lock.
constexpr int kMallocArenas = 4;
void limit_malloc_arenas();

}  // namespace gcfs::cli
