// A ChunkEngine that forwards to another and adds up the time its calls take, from every thread:
// the re-key's "cipher" time, told apart from the time spent reading and writing the backing files.
#pragma once

#include <atomic>
#include <chrono>

#include "crypto/chunk_engine.h"

namespace gcfs {

class TimedEngine : public ChunkEngine {
 public:
  explicit TimedEngine(ChunkEngine& inner) : inner_(&inner) {}
  // Before any use: the engine chosen once the work's size is known.
  void set_inner(ChunkEngine& inner) { inner_ = &inner; }
  std::string name() const override { return inner_->name(); }
  void seal(std::span<ChunkOp> ops) override { timed([&] { inner_->seal(ops); }); }
  void open(std::span<ChunkOp> ops) override { timed([&] { inner_->open(ops); }); }
  HostBuffer allocate_io_buffer(std::size_t bytes) override { return inner_->allocate_io_buffer(bytes); }
  bool degraded() const override { return inner_->degraded(); }
  // Seconds spent inside seal and open so far, summed over threads.
  double seconds() const { return static_cast<double>(ns_.load()) / 1e9; }

 private:
  template <typename F>
  void timed(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ns_ += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  }
  ChunkEngine* inner_;
  std::atomic<std::uint64_t> ns_{0};
};

}  // namespace gcfs
