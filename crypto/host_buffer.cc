#include <sys/mman.h>

#include <new>

#include "crypto/chunk_engine.h"

namespace gcfs {

// Mapped, not taken from the heap: every request thread keeps three scratch buffers sized for the
// largest request (some 7 MiB a thread), and the heap's `new T[n]()` writes every page of them, so
// a daemon that never read a byte held them all resident (118 MB with 16 threads). Fresh anonymous
// pages read as zeros and cost memory only once written, so a thread that serves only names and
// attributes, or only small reads, holds only the pages it used. Unmapping also keeps these
// buffers out of malloc's arenas, whose thresholds a freed buffer of a megabyte would otherwise
// raise, leaving megabytes free but resident in each thread's arena.
HostBuffer HostBuffer::plain(std::size_t size) {
  const std::size_t mapped = size ? size : 1;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return HostBuffer(
      static_cast<std::uint8_t*>(p), size, [mapped](std::uint8_t* q, std::size_t) { ::munmap(q, mapped); }, false);
}

}  // namespace gcfs
