#include "fs/content/scratch.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace gcfs {

namespace {

struct Slot {
  const ChunkEngine* owner = nullptr;
  HostBuffer buf;
};
thread_local Slot t_bufs[3];
thread_local std::size_t t_planned[3];

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

void plan_scratch(ScratchSlot which, std::size_t n) { t_planned[which] = std::max(t_planned[which], n); }

HostBuffer& scratch(ChunkEngine& engine, ScratchSlot which, std::size_t n) {
  auto& s = t_bufs[which];
  if (s.owner != &engine || s.buf.size() < n) {
    constexpr std::size_t kFirst = std::size_t{64} << 10;
    std::size_t size = kFirst;
    if (n <= t_planned[which]) {
      size = std::max(size, round_up(t_planned[which], kFirst));  // the planned size, not twice it
    } else {
      while (size < n) size *= 2;
    }
    HostBuffer fresh = engine.allocate_io_buffer(size);
    if (s.buf.data() && s.buf.size()) std::memcpy(fresh.data(), s.buf.data(), std::min(s.buf.size(), size));
    s.buf = std::move(fresh);
    s.owner = &engine;
  }
  return s.buf;
}

}  // namespace gcfs
