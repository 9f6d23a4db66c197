// What the gpu engine's batches are made of: a GPU in use (DeviceState), a stream with its staging
// buffers (Slot), one caller's request and the pieces it is cut into, and the batch that gathers
// pieces for one launch. Internal to cuda/.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "crypto/chunk_engine.h"
#include "cuda/batch_layout.h"
#include "cuda/cuda_handles.h"
#include "cuda/gcm_kernels.h"
#include "cuda/thread_waiter.h"

namespace gcfs::gpu {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kSlotKeys = 64;            // distinct keys one batch may use
constexpr std::size_t kMaxBatchChunks = 16384;   // ops one batch may hold

inline std::size_t align256(std::size_t n) { return (n + 255) & ~std::size_t{255}; }

struct DeviceState {
  int device = 0;
  std::size_t order = 0;  // its place in the engine's list: the GPU that fills first comes first
  int sm_count = 0;
  int launch_sms = 0;   // SMs a cooperative launch may count on: those the resident worker leaves
  int numa_node = -1;   // of its PCI slot; its slots' pinned buffers are allocated there
  bool broken = false;  // failed: its slots are out of use (guarded by the engine's mutex)
  DeviceBuffer te0;
  DeviceTables tables;
};

// One stream with its staging: pinned host buffers, device buffers, and a small cache of the keys
// whose material already sits in device memory.
struct Slot {
  Slot(DeviceState& d, std::size_t max_data, bool write_combined_upload)
      : dev(&d),
        stream(d.device),
        done(d.device, cudaEventDisableTiming | cudaEventBlockingSync),
        header_cap(header_capacity(kMaxBatchChunks)),
        results_cap(align256(kMaxBatchChunks * (sizeof(Block128) + sizeof(std::uint32_t)))),
        data_cap(max_data),
        h_in(header_cap + data_cap, write_combined_upload),
        h_out(results_cap + data_cap),
        h_keys(kSlotKeys * sizeof(KeyBlob)),
        d_in(d.device, header_cap + data_cap),
        d_out(d.device, results_cap + data_cap),
        d_keys(d.device, kSlotKeys * sizeof(KeyBlob)),
        d_scratch(d.device, kDirectMaxChunks * sizeof(ChunkScratch)) {
    check_cuda(cudaMemset(d_scratch.get(), 0, d_scratch.size()), "clearing the GPU scratch");
  }
  // Freed only after ~GpuEngine synchronized the device; the buffers zero themselves (cuda_handles.h).

  DeviceState* dev;
  Stream stream;
  Event done;
  // One upload per batch: [descriptors | prefix sums | zeroed scratch | data]; one download:
  // [tags | ok | data]. Fewer copies, fewer driver calls: that is most of a small request's time.
  std::size_t header_cap, results_cap, data_cap;
  PinnedBuffer h_in, h_out, h_keys;
  DeviceBuffer d_in, d_out, d_keys;
  // Direct batches' scratch, which their kernel leaves zeroed, and its grid barrier's running count.
  DeviceBuffer d_scratch;
  std::uint32_t barrier_count = 0;
  std::array<ChunkKey, kSlotKeys> keys{};
  std::array<std::uint64_t, kSlotKeys> key_used{};  // batch number of last use; 0 = empty
  std::uint64_t batches = 0;
  bool broken = false;
};

// One caller's request. Its thread sleeps on its own waiter, woken only when the last of its
// pieces is done or when it is asked to lead (a slot is free and its pieces wait in the queue):
// one wake-up per event instead of every waiting caller for every finished batch.
struct Request {
  std::size_t pending = 0;
  std::shared_ptr<Waiter> waiter = this_thread_waiter();
};

struct Piece {
  Request* request;
  std::span<ChunkOp> ops;
  std::size_t bytes;        // padded data bytes
  std::size_t key_changes;  // upper bound on distinct keys
  bool seal;
};

struct Batch {
  Slot* slot = nullptr;
  bool seal = true;
  std::vector<Piece> pieces;
  std::vector<ChunkOp*> ops;
  std::vector<std::size_t> offsets;  // of each op's data; kept here, the upload buffer may be write-only
  // Per op: the GPU copies its input straight from op.in / its output straight to op.out (both in
  // memory this engine pinned), instead of through the staging buffers. The value is the start of
  // the pinned buffer that holds it (0: not direct), so that one 2D copy never spans two buffers.
  std::vector<std::uintptr_t> direct_in, direct_out;
  bool any_staged_out = true;
  // Every op direct both ways and 4-byte aligned: the kernel can move the data itself.
  bool all_direct = false;
  // Poll for the result before sleeping: while one request alone uses the engine, or the batch is
  // small and the callers few (GpuOptions::spin_batch_bytes). With many callers, batches are
  // gathered and a poll would only take a core from them, so leaders sleep until the GPU signals.
  bool spin = false;
  // Pieces of more than one caller's request.
  bool gathered = false;
  BatchPlan plan;
  std::size_t out_data_offset = 0;
};

}  // namespace gcfs::gpu
