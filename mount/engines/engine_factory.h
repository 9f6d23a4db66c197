// Turns the --engine choice into an engine: the one place that knows both the cpu engine and the
// gpu engine (fs/ is handed the result and sees only crypto/chunk_engine.h). "auto" is the hybrid
// engine (crypto/hybrid_engine.h) over the cpu engine and one gpu engine per GPU in use, each
// batch shared between them by measured cost, starting from a short calibration of every member
// (a tenth of a second or so); it is the cpu engine alone (saying why in the log) where no usable
// GPU is present.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "cuda/gpu_engine.h"

namespace gcfs {

class HybridEngine;

struct EngineOptions {
  std::string name = "auto";          // cpu | gpu | auto
  std::size_t cpu_threads = 0;        // 0: all cores
  GpuOptions gpu;
  // "gpu" only, on trial (gpu_engine_bench --shapes measures it beside the plain gpu engine): one
  // gpu engine per GPU behind the hybrid engine's queue, so that every batch is gathered and
  // launched by feeder threads instead of by the callers.
  bool gpu_feeders = false;
  // "gpu" over several GPUs: one gpu engine per GPU, and each batch goes whole, in its caller's
  // thread, to the GPU that the hybrid engine's model says finishes it first (its measured rate and
  // the bytes already at work there), so every GPU has its own queue, lock and streams. False: one
  // gpu engine over all of them, whose launches gather every caller's work and fill one GPU's
  // streams before the next's (what `--engine gpu` was before; benchmarks compare the two).
  bool gpu_engine_per_gpu = true;
  // "gpu" only: batches smaller than the crossover measured at start (where the GPU's round trip
  // beats one CPU thread) run on the cpu engine (crypto/size_routed_engine.h). False: every batch
  // to the GPU (the GPU benchmarks, which measure the GPU itself).
  bool small_batches_on_cpu = true;
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
  // How the work was shared so far (auto with GPUs: each member's estimate and share of the bytes;
  // empty otherwise), for the log at unmount.
  std::string usage() const;

 private:
  // The constructor's steps (engine_factory.cc): what it found out about the GPUs, then one step
  // per --engine choice, and the pieces those share.
  struct GpuChoice;
  void choose_cpu(const EngineOptions& o);
  void choose_gpu(const EngineOptions& o, const GpuChoice& c);
  void choose_gpu_small_batches_on_cpu();
  void choose_auto(const EngineOptions& o, const GpuChoice& c);
  void make_engine_per_gpu(const GpuChoice& c);
  std::string put_gpus_behind_hybrid(const GpuChoice& c, bool whole_batches);

  std::unique_ptr<ChunkEngine> cpu_;
  std::unique_ptr<ChunkEngine> router_;  // "gpu": small batches to cpu_, the rest to the GPU
  std::vector<std::unique_ptr<ChunkEngine>> gpus_;  // gpu: one over every GPU; auto: one per GPU
  std::unique_ptr<HybridEngine> hybrid_;
  ChunkEngine* active_ = nullptr;
  std::string description_;
};

}  // namespace gcfs
