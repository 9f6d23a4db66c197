// The CUDA kernels of the gpu engine and how to launch them: the two-launch path and the variants'
// task sizes (batch_kernels.cu), the fused launches (fused_kernels.cu), the resident worker
// (resident_kernel.cu), their setup and the empty kernel (gcm_kernels.cu). Internal to cuda/:
// includes the CUDA runtime, so nothing outside this folder may include it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/gcm_layout.h"

namespace gcfs::gpu {

// Kernel variants: "coarse" runs one thread per AES block (several blocks per thread for large
// batches), "fine" four threads per block, one per column, for batches too small to fill the chip.
enum class CtrVariant { Coarse, Fine };
bool parse_variant(const std::string& name, CtrVariant* out);

// Device pointers of one batch. `in` and `out` share the layout given by the descriptors.
struct BatchView {
  const ChunkDesc* descs = nullptr;
  std::uint32_t chunks = 0;
  const std::uint32_t* ctr_task_prefix = nullptr;   // chunks + 1 entries
  std::uint32_t ctr_tasks = 0;       // data tasks first, then tag-mask tasks
  std::uint32_t ctr_data_tasks = 0;
  const std::uint32_t* segment_prefix = nullptr;    // chunks + 1 entries
  std::uint32_t segments = 0;
  std::uint32_t segment_blocks = kSegmentBlocksLarge;
  const KeyBlob* keys = nullptr;
  const std::uint8_t* in = nullptr;
  std::uint8_t* out = nullptr;
  Block128* tags = nullptr;         // seal: written
  std::uint32_t* ok = nullptr;      // open: written (1 = tag matched)
  ChunkScratch* scratch = nullptr;  // zeroed before the launch (uploaded with the descriptors)
  bool open = false;
  // Direct (fused kernel only): the kernel reads each chunk from its descriptor's host_in and
  // writes it to host_out, page-locked host memory it reaches over the bus, so a small request
  // costs no copy calls at all; `out` then receives a device copy of every chunk's ciphertext
  // (sealed output or opened input) for GHASH to read, and `tags` / `ok` may be host memory too.
  bool direct = false;
};

// Static device state: the Te0 table the kernels expand into shared memory.
struct DeviceTables {
  const std::uint32_t* te0 = nullptr;
};

// Blocks one CTR task covers for a variant and the batch's total block count; the host needs it
// to build ctr_task_prefix before the launch.
std::uint32_t ctr_task_blocks(CtrVariant v, std::uint64_t total_blocks, int sm_count);

// Seal: CTR over in -> out, then GHASH over out -> tags. Open: CTR over in -> out, then GHASH
// over in -> ok, zeroing out for chunks whose tag does not match. Asynchronous on stream.
cudaError_t launch_seal(const BatchView& b, CtrVariant v, std::uint32_t task_blocks, const DeviceTables& t,
                        int sm_count, cudaStream_t stream);
cudaError_t launch_open(const BatchView& b, CtrVariant v, std::uint32_t task_blocks, const DeviceTables& t,
                        int sm_count, cudaStream_t stream);
// Seal or open (b.open) of a small batch in one cooperative launch: the fine CTR pass, a grid-wide
// barrier, then GHASH. Needs task_blocks == 16 (the fine variant's) and chunk 0's scratch zeroed,
// as every batch's is. Same results as launch_seal / launch_open. With b.direct the header is in
// device memory but the data is moved by the kernel (any number of descriptors; up to
// kDirectMaxChunks, launch_fused_direct saves the header's copy).
cudaError_t launch_fused(const BatchView& b, const DeviceTables& t, int sm_count, cudaStream_t stream);
// A direct batch's header, passed in the launch's parameters instead of copied to the GPU first
// (kernel parameters of this size need CUDA 12.1 and a Volta or newer GPU).
constexpr std::uint32_t kDirectMaxChunks = 32;
struct alignas(16) DirectHeader {
  ChunkDesc descs[kDirectMaxChunks];
  std::uint32_t ctr_task_prefix[kDirectMaxChunks + 1];
  std::uint32_t segment_prefix[kDirectMaxChunks + 1];
  std::uint32_t barrier_target;  // set by the launch
};
static_assert(sizeof(DirectHeader) + sizeof(BatchView) + 64 < 32764, "kernel parameters are limited to 32764 bytes");

// The fused launch of a direct batch (b.direct, at most kDirectMaxChunks chunks) with its header in
// the parameters. b.scratch is the stream's own scratch, zeroed once when it was allocated: the
// kernel leaves it zeroed again, except for the grid barrier's counter, which only grows and whose
// running count the caller keeps in *barrier_count (one per scratch; launches on it in order).
cudaError_t launch_fused_direct(const BatchView& b, DirectHeader& h, std::uint32_t* barrier_count,
                                const DeviceTables& t, int sm_count, cudaStream_t stream);
// The resident worker: a kernel that stays on the GPU and takes chunk ops from a ring in host
// memory (ResidentEntry), so a small request costs no launch, no copy call and no event: the host
// writes a descriptor, the GPU reads the data over the bus, writes the result back and marks the
// entry done. Each CTA takes one ticket at a time (an atomic counter in device memory), waits for
// that entry to be posted, seals or opens the chunk (CTR, then GHASH over a device copy of the
// ciphertext), and answers. Key material is read through L2 only (never the read-only cache), so
// the host may load a new key into a free slot while the kernel runs.
struct ResidentView {
  ResidentEntry* ring = nullptr;               // host memory, ring_mask + 1 entries
  std::uint64_t ring_mask = 0;
  // Device memory, three words: the next ticket to take, the tickets known to be published, and
  // whether the kernel is stopping (set by the start, all three).
  unsigned long long* next_ticket = nullptr;
  const std::uint64_t* published = nullptr;    // host memory: tickets posted so far
  const std::uint32_t* stop = nullptr;         // host memory: nonzero ends the kernel
  const KeyBlob* keys = nullptr;               // device memory, the worker's key slots
  std::uint8_t* text = nullptr;                // device memory, kMaxGpuChunkBytes per CTA
  std::uint8_t* stage = nullptr;               // device memory, kMaxGpuChunkBytes per CTA: in-place results
  ChunkScratch* part_sums = nullptr;           // device memory, one per ring entry, zeros: split chunks' sums
  bool trace = false;                          // write the entries' stamps (GPUCRYPTFS_RESIDENT_TRACE)
};
// A resident entry's descriptor: bit 0 of `reserved` says open (not seal). Bits 1 to 31 of
// `reserved` and all of `data_offset` number the load of the key into its slot (a 63-bit count over
// the queue's life, never repeated), so a CTA knows when the GHASH tables it holds in shared memory
// are another key's.
constexpr std::uint32_t kResidentOpen = 1;
cudaError_t launch_resident(const ResidentView& v, const DeviceTables& t, int ctas, cudaStream_t stream);

// CTR alone (the keystream benchmark).
cudaError_t launch_ctr_only(const BatchView& b, CtrVariant v, std::uint32_t task_blocks, const DeviceTables& t,
                            int sm_count, cudaStream_t stream);

// An empty kernel: the launch-and-return floor the probe measures.
cudaError_t launch_empty_kernel(cudaStream_t stream);

// Once per device before any launch: raises the shared-memory limit of the kernels and loads every
// kernel (gcm_kernels.cu). Its parts, one per kernel file, since a kernel is reachable only from the
// file that defines it (no relocatable device code).
cudaError_t configure_kernels();
cudaError_t configure_batch_kernels();    // batch_kernels.cu
cudaError_t configure_fused_kernels();    // fused_kernels.cu
cudaError_t configure_resident_kernel();  // resident_kernel.cu

}  // namespace gcfs::gpu
