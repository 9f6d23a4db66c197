// The host side of the resident worker (gcm_kernels.h: ResidentView): a kernel that stays on one
// GPU and takes chunk ops from a ring in page-locked host memory. A request then costs no CUDA call
// at all: the caller writes one descriptor per chunk and sleeps; one poller thread per process sees
// every GPU's answers in host memory and wakes the callers. Internal to cuda/.
//
// The kernel is started on the first request and stopped after a quiet spell (idle_stop), so an idle
// mount leaves the GPU idle, and before any CUDA call that may wait for the whole device (freeing
// page-locked memory, allocating): see ResidentPause.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/secret.h"
#include "cuda/cuda_handles.h"
#include "cuda/gcm_kernels.h"

namespace gcfs::gpu {

class SharedPoller;

struct ResidentOptions {
  int ctas = 32;                               // CTAs the worker holds, one per SM
  std::size_t ring_entries = 4096;             // a power of two
  std::size_t key_slots = 256;
  std::chrono::milliseconds idle_stop{100};    // the kernel ends after this long without work
  // A chunk goes to up to max_parts CTAs at once (gcm_layout.h: resident_part_range) while the
  // worker has CTAs to spare, each part at least min_part_segments GHASH segments of a split chunk (2 KiB each).
  // Few callers then wait for a fraction of a chunk's time on the GPU; under load, one CTA a chunk.
  int max_parts = 4;
  std::uint32_t min_part_segments = 8;
  // Waking a sleeping thread costs tens of microseconds on these hosts, as long as a small chunk's
  // trip through the GPU: the poller keeps polling this long after the last answer before it
  // sleeps, and a caller polls this long for its answer while at most spin_callers callers wait.
  std::chrono::microseconds linger{50};
  int spin_callers = 2;
  std::function<void(const std::string&)> on_error;
};

class ResidentQueue {
 public:
  using KeyMaterial = std::function<std::shared_ptr<const SecretBytes>(const ChunkKey&)>;
  ResidentQueue(int device, const DeviceTables& tables, ResidentOptions options, KeyMaterial key_material);
  ~ResidentQueue();
  ResidentQueue(const ResidentQueue&) = delete;
  ResidentQueue& operator=(const ResidentQueue&) = delete;

  enum class Outcome {
    Done,      // every op sealed or opened (op.tag / op.ok set)
    NotTaken,  // nothing was done: the ring or the key slots are full, or the worker is paused
    Failed,    // the GPU failed: outputs may be partly written; redo every op elsewhere
  };
  // Each op must be one the kernels take (key, len <= kMaxGpuChunkBytes, aad <= kMaxAadBytes), with
  // len > 0 and in and out in page-locked memory, 4-byte aligned, and either the same or not
  // overlapping (in place, the result reaches the buffer only once the chunk is done).
  Outcome run(std::span<ChunkOp> ops, bool seal);

  // ResidentPause: lets the ops in flight finish and stops the kernel (run() takes no new ones
  // while a pause lasts).
  void drain_and_stop();

 private:
  friend class SharedPoller;
  struct Pending;
  struct EntryInfo {
    ChunkOp* op = nullptr;
    Pending* request = nullptr;
    std::uint32_t slot = 0;
    std::uint32_t part = 0, parts = 1;  // a split chunk's entries are answered together, by part 0
    std::chrono::steady_clock::time_point posted_at;  // traced runs only
    std::atomic<bool> busy{false};
  };
  bool take_key_slots(std::span<ChunkOp> ops, std::span<const std::uint32_t> parts, std::vector<std::uint32_t>& slots);
  std::uint32_t parts_for(const ChunkOp& op, std::uint32_t per_chunk) const;
  void ensure_running();          // lock held
  void stop_kernel();             // lock held, nothing in flight
  // The poller's turn at this queue: answers what the GPU finished, checks now and then that the
  // kernel is alive, and stops it after a quiet spell. Busy: something is in flight, or was
  // answered within the linger; otherwise *stop_in is how long until a running kernel's idle stop
  // (zero when none runs).
  enum class PollState { Busy, Quiet };
  PollState poll_once(std::chrono::steady_clock::time_point now, std::chrono::nanoseconds* stop_in);
  bool collect();                 // poller: answers the entries the GPU finished
  void answer(EntryInfo& info);
  void fail_all(const std::string& what);

  int device_;
  DeviceTables tables_;
  ResidentOptions options_;
  KeyMaterial key_material_;
  Stream stream_, upload_stream_;
  PinnedBuffer ring_, control_, key_staging_;
  DeviceBuffer next_ticket_, keys_, text_, stage_, part_sums_;
  std::vector<EntryInfo> info_;

  // Held for a few hundred nanoseconds per request (claiming tickets, filling descriptors), by
  // dozens of callers at once: a lock that spins before it yields, since a sleeping mutex's
  // futex calls would cost more than the wait. Rarely held long (loading a key, starting the kernel).
  class SpinLock {
   public:
    void lock() {
      for (int i = 0; flag_.exchange(true, std::memory_order_acquire); ++i) {
        while (flag_.load(std::memory_order_relaxed)) {
          if (++i > 200) std::this_thread::yield();
          else __builtin_ia32_pause();
        }
      }
    }
    void unlock() { flag_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> flag_{false};
  };
  SpinLock mu_;                   // submissions, key slots, start and stop
  std::uint64_t next_ = 0;        // next ticket
  bool running_ = false;
  struct KeySlot {
    ChunkKey key{};
    bool used = false;
    std::uint64_t last_use = 0;
    std::uint64_t generation = 0;  // key_loads_ when this key was loaded (the kernel's table cache)
  };
  std::vector<KeySlot> slots_;
  std::unique_ptr<std::atomic<int>[]> slot_refs_;
  std::unordered_map<std::uint64_t, std::uint32_t> slot_of_;  // key fingerprint -> slot (checked in full)
  std::uint64_t uses_ = 0;
  std::uint64_t key_loads_ = 0;

  std::atomic<int> callers_{0};
  std::atomic<std::size_t> in_flight_{0};
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> starts_{0};  // kernel starts, for the trace
  std::uint64_t oldest_ = 0;      // poller only: the oldest ticket not answered yet
  std::chrono::steady_clock::time_point last_work_, last_check_;  // poller only
  SharedPoller* poller_ = nullptr;
  // GPUCRYPTFS_RESIDENT_TRACE: mean times per chunk, printed when the queue ends (poller only).
  bool trace_ = false;
  std::uint64_t trace_n_ = 0;
  double trace_round_trip_ = 0, trace_ctr_ = 0, trace_mask_ = 0, trace_ghash_ = 0, trace_fence_ = 0;
};

// Process-wide: stops every resident worker (in flight ops finish first) for the life of this
// object, so that a CUDA call that may wait for a whole device to go idle (cudaFreeHost,
// cudaHostAlloc, cudaMalloc) does not wait on a kernel that never ends. Requests meanwhile take the
// engine's ordinary path.
class ResidentPause {
 public:
  ResidentPause();
  ~ResidentPause();
  ResidentPause(const ResidentPause&) = delete;
  ResidentPause& operator=(const ResidentPause&) = delete;
};

}  // namespace gcfs::gpu
