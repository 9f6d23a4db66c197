// Turns the --engine choice into an engine. "auto" sends each batch to the gpu engine when it is
// large enough for the GPU to win and to the cpu engine otherwise, and is the cpu engine alone
// (saying why in the log) where no usable GPU is present. The crossover is measured when the engine
// starts (a short calibration of both engines' round trip) unless one is given.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "crypto/chunk_engine.h"
#include "cuda/gpu_engine.h"

namespace gcfs {

struct EngineOptions {
  std::string name = "auto";          // cpu | gpu | auto
  std::size_t cpu_threads = 0;        // 0: all cores
  GpuOptions gpu;
  // 0: measure at start (about a tenth of a second); otherwise batches of at least this many
  // bytes go to the GPU.
  std::size_t auto_crossover_bytes = 0;
};

// Owns the engines it builds; engine() is what the filesystem talks to.
class EngineSet {
 public:
  // Throws UserError for an unknown name, or for "gpu" without a usable GPU (naming the problem).
  explicit EngineSet(const EngineOptions& options);
  ~EngineSet();
  ChunkEngine& engine() { return *active_; }
  ChunkEngine& cpu() { return *cpu_; }
  // What was chosen and why, for the log and `info`.
  const std::string& description() const { return description_; }

 private:
  std::unique_ptr<ChunkEngine> cpu_;
  std::unique_ptr<ChunkEngine> gpu_;
  std::unique_ptr<ChunkEngine> hybrid_;
  ChunkEngine* active_ = nullptr;
  std::string description_;
};

}  // namespace gcfs
