// The gpu engine's class (make_gpu_engine in gpu_engine.h builds one), declared here for the files
// that define its parts:
//   gpu_engine.cu        the scheduler: a caller's request cut into pieces, the queue, the callers
//                        that lead batches onto free slots, a failed GPU and the fallback;
//   gpu_batch_launch.cu  one batch: its keys, staging, copies and kernels, and its results.
// Internal to cuda/.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/thread_pool.h"
#include "cuda/gpu_batch.h"
#include "cuda/gpu_engine.h"
#include "cuda/host_key_cache.h"
#include "cuda/pinned_registry.h"
#include "cuda/resident_queue.h"

namespace gcfs::gpu {

// What every gpu engine of this process has launched (gpu_launch_counters).
extern std::atomic<std::uint64_t> g_launches, g_pieces, g_requests;

class GpuEngine final : public ChunkEngine {
 public:
  GpuEngine(const GpuOptions& o, ChunkEngine& fallback, std::vector<int> devices);
  ~GpuEngine() override;

  std::string name() const override { return "gpu"; }
  // Every GPU of this engine has failed: batches run on the fallback.
  bool degraded() const override { return lost_.load(std::memory_order_relaxed); }
  void seal(std::span<ChunkOp> ops) override { run(ops, true); }
  void open(std::span<ChunkOp> ops) override { run(ops, false); }
  HostBuffer allocate_io_buffer(std::size_t bytes) override;

 private:
  // The scheduler (gpu_engine.cu).
  bool parse_kernel(const std::string& k);
  bool small_with_a_cold_key(std::span<const ChunkOp> ops);
  bool resident_can_take(std::span<const ChunkOp> ops);
  static bool gpu_can_take(const ChunkOp& op) {
    return op.key && op.len <= kMaxGpuChunkBytes && op.aad_len <= kMaxAadBytes;
  }
  void run(std::span<ChunkOp> ops, bool seal);
  void hand_off();
  void split(std::span<ChunkOp> ops, bool seal, Request& req, std::vector<Piece>& pieces);
  void maybe_gather(std::unique_lock<std::mutex>& lock, std::size_t in_flight, const Request& own);
  Batch take_batch();
  Slot* take_free_slot();
  void fail(Slot& s, const std::string& what);
  void run_fallback(std::span<ChunkOp> ops, bool seal) { seal ? fallback_.seal(ops) : fallback_.open(ops); }
  void finish_on_fallback(std::unique_lock<std::mutex>& lock, Batch& b);
  void finish_slot(Slot* slot, bool reusable) {
    if (slot && reusable && !slot->dev->broken) free_.push_back(slot);
  }
  void finish(Batch& b, bool slot_reusable);

  // One batch on its slot (gpu_batch_launch.cu). launch and complete return false when the GPU
  // failed the batch (fail() has been told).
  struct LaunchShape;
  bool launch(Batch& b);
  void check_injected_failure(const Slot& s);
  LaunchShape shape_batch(Batch& b, Slot& s);
  void stage_batch(Batch& b, Slot& s, const LaunchShape& shape, std::vector<unsigned char>& direct_header);
  void start_batch(Batch& b, Slot& s, const LaunchShape& shape, const std::vector<unsigned char>& direct_header);
  bool complete(Batch& b);
  std::uint32_t key_slot(Slot& s, const ChunkKey& key, std::vector<std::uint32_t>& uploads);
  void classify_direct(Batch& b);

  std::optional<ResidentPause> teardown_pause_;  // first member: the last one freed
  GpuOptions options_;
  ChunkEngine& fallback_;
  bool auto_kernel_ = true;
  bool upload_wc_ = false;
  CtrVariant variant_ = CtrVariant::Coarse;
  std::size_t max_data_ = 0, piece_limit_ = 0;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::vector<std::unique_ptr<Slot>> slots_;
  HostKeyCache host_keys_;
  std::shared_ptr<PinnedRegistry> pinned_ = shared_pinned_registry();
  std::unique_ptr<ThreadPool> copy_pool_;
  std::vector<std::unique_ptr<ResidentQueue>> residents_;  // one per GPU (GpuOptions::resident)
  std::atomic<std::size_t> next_resident_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> queue_;
  std::deque<Slot*> free_;
  bool disabled_ = false;               // every GPU failed
  std::atomic<bool> lost_{false};       // disabled_, for degraded() without the lock
  std::size_t active_requests_ = 0;  // callers inside run()
  std::atomic<int> launches_{0};
};

}  // namespace gcfs::gpu
