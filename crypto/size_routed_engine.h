// An engine that sends small batches to one engine and the rest to another: what `--engine gpu`
// is on a mount. A GPU's round trip (the launch, the bus both ways, the wait for the result: 30 to
// 40 us on an H100) is longer than AES-NI takes for a batch of up to about a hundred KiB, and its
// driver calls cost the daemon more CPU than that AES would: a lone 10 KiB write sent to the GPU is
// slower and no cheaper. So batches under the crossover, measured at start on the machine at hand
// (mount/engines/engine_factory.cc), run on the cpu engine in the caller's thread, and the GPU gets the
// batches it does faster: streams, large requests, gathered work.
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <string>

#include "crypto/chunk_engine.h"

namespace gcfs {

class SizeRoutedEngine final : public ChunkEngine {
 public:
  // Batches of fewer than below_bytes (the sum of their ops' lengths) go to `small`, the others to
  // `large`. Both must outlive this engine. name(), buffers and degraded() are large's: it is the
  // engine the user chose, and its memory serves the small one as well as any.
  SizeRoutedEngine(ChunkEngine& small, ChunkEngine& large, std::size_t below_bytes)
      : small_(small), large_(large), below_(below_bytes) {}

  std::string name() const override { return large_.name(); }
  void seal(std::span<ChunkOp> ops) override { pick(ops).seal(ops); }
  void open(std::span<ChunkOp> ops) override { pick(ops).open(ops); }
  HostBuffer allocate_io_buffer(std::size_t bytes) override { return large_.allocate_io_buffer(bytes); }
  bool degraded() const override { return large_.degraded(); }

  std::size_t below_bytes() const { return below_; }
  // Batches each engine took so far (for tests and the log).
  std::size_t small_batches() const { return small_count_.load(std::memory_order_relaxed); }
  std::size_t large_batches() const { return large_count_.load(std::memory_order_relaxed); }

 private:
  ChunkEngine& pick(std::span<const ChunkOp> ops);

  ChunkEngine& small_;
  ChunkEngine& large_;
  const std::size_t below_;
  std::atomic<std::size_t> small_count_{0}, large_count_{0};
};

}  // namespace gcfs
