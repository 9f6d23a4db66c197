#include "fs/content/scratch.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace gcfs {

HostBuffer& scratch(ChunkEngine& engine, ScratchSlot which, std::size_t n) {
  struct Slot {
    const ChunkEngine* owner = nullptr;
    HostBuffer buf;
  };
  thread_local Slot bufs[3];
  auto& s = bufs[which];
  if (s.owner != &engine || s.buf.size() < n) {
    std::size_t size = std::size_t{64} << 10;
    while (size < n) size *= 2;
    HostBuffer fresh = engine.allocate_io_buffer(size);
    if (s.buf.data() && s.buf.size()) std::memcpy(fresh.data(), s.buf.data(), std::min(s.buf.size(), size));
    s.buf = std::move(fresh);
    s.owner = &engine;
  }
  return s.buf;
}

}  // namespace gcfs
