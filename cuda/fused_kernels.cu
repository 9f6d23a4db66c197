// The fused kernels of the gpu engine: a small batch's CTR pass and GHASH in one cooperative
// launch, separated by a grid-wide barrier; the direct forms read and write the callers' host
// memory themselves, the smallest with the batch's header in the launch's parameters.
#include <algorithm>

#include "cuda/aes_device.cuh"
#include "cuda/ctr_device.cuh"
#include "cuda/gcm_kernels.h"
#include "cuda/ghash_device.cuh"

namespace gcfs::gpu {
namespace {

// The fused form for small batches: CTR (the fine variant) and GHASH in one launch, separated by
// a grid-wide barrier. Sound only because the launch is cooperative: the runtime refuses it unless
// every CTA is resident at once, so no CTA can wait on one that never starts. Saves the second
// launch and the gap between the kernels, which is a visible share of a small request's round trip.
//
// The counter is a word of chunk 0's scratch (its pad). A copied batch uploads it zeroed and waits
// for gridDim.x; a direct batch's counter lives on from batch to batch in its slot, so the host
// passes the target (the count before the launch plus gridDim.x; compared modulo 2^32).
__device__ __forceinline__ void grid_barrier(std::uint32_t* counter, std::uint32_t target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this CTA's output and tag masks are visible before it is counted
    atomicAdd(counter, 1u);
    while (static_cast<int>(atomicAdd(counter, 0u) - target) < 0) __nanosleep(32);
    __threadfence();
  }
  __syncthreads();
}

template <bool Direct>
__device__ __forceinline__ void fused_body(const BatchView& b, const std::uint32_t* __restrict__ te0,
                                           std::uint32_t barrier_target) {
  extern __shared__ __align__(16) unsigned char smem[];
  const std::uint32_t tab = tables_base(smem);
  fill_tables(tab, te0);
  __syncthreads();
  ctr_fine_body<2, Direct>(b, tab);
  grid_barrier(&b.scratch[0].pad[0], barrier_target);

  // GHASH: warp w of CTA x takes segments x + (w + 16 k) * gridDim.x, so while there are no more
  // segments than CTAs each segment has a CTA to itself. The CTA loads the tables of its first
  // segment's key into shared memory (the AES tables are no longer needed); a segment of another
  // key reads its tables through L1.
  if (blockIdx.x >= b.segments) return;
  const std::uint32_t key0 = b.descs[find_chunk(b.segment_prefix, b.chunks, blockIdx.x)].key;
  auto* tables = reinterpret_cast<std::uint32_t*>(smem);
  {
    const uint4* src = reinterpret_cast<const uint4*>(b.keys[key0].tables);
    uint4* dst = reinterpret_cast<uint4*>(tables);
    for (std::uint32_t i = threadIdx.x; i < kPowerTables * kNibbleTableBytes / 16; i += blockDim.x) dst[i] = __ldg(src + i);
  }
  __syncthreads();
  const std::uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (std::uint32_t seg = blockIdx.x + warp * gridDim.x; seg < b.segments; seg += warps * gridDim.x) {
    const std::uint32_t c = find_chunk(b.segment_prefix, b.chunks, seg);
    const std::uint32_t k = b.descs[c].key;
    if (k == key0) {
      ghash_segment<true>(b, seg, c, lane,
                          [tables](const Block128& x, int l) { return mul_table_shared(x, tables + l * kNibbleTableWords); });
    } else {
      const KeyBlob* key = b.keys + k;
      ghash_segment<true>(b, seg, c, lane,
                          [key](const Block128& x, int l) { return mul_table_global(x, key->tables[l]); });
    }
  }
}

__global__ void __launch_bounds__(kCtaThreads, 1) fused_small(BatchView b, const std::uint32_t* __restrict__ te0) {
  fused_body<false>(b, te0, gridDim.x);
}

// A direct batch with more descriptors than the launch's parameters hold: its header was copied to
// the GPU (one small copy, with zeroed scratch as a copied batch's), the data still moves over the
// bus inside the kernel and the results go straight to host memory.
__global__ void __launch_bounds__(kCtaThreads, 1)
    fused_small_direct(BatchView b, const std::uint32_t* __restrict__ te0) {
  fused_body<true>(b, te0, gridDim.x);
}

// A direct batch: the header comes in the launch's parameters (no copy before the launch), the
// data moves over the bus inside the kernel, the results go straight to host memory.
__global__ void __launch_bounds__(kCtaThreads, 1)
    fused_direct(const __grid_constant__ DirectHeader h, BatchView b, const std::uint32_t* __restrict__ te0) {
  b.descs = h.descs;
  b.ctr_task_prefix = h.ctr_task_prefix;
  b.segment_prefix = h.segment_prefix;
  fused_body<true>(b, te0, h.barrier_target);
}

// CTAs of a fused launch: enough for the CTR tasks or one per GHASH segment, at most one per SM
// (a cooperative launch needs them all resident at once).
std::uint32_t fused_grid(const BatchView& b, int sm_count) {
  const std::uint32_t warps_per_cta = kCtaThreads / 32;
  const std::uint32_t ctr_ctas = (b.ctr_tasks + warps_per_cta - 1) / warps_per_cta;
  return std::max(1u, std::min<std::uint32_t>(static_cast<std::uint32_t>(sm_count), std::max(ctr_ctas, b.segments)));
}

}  // namespace

cudaError_t launch_fused(const BatchView& b, const DeviceTables& t, int sm_count, cudaStream_t stream) {
  if (b.chunks == 0) return cudaSuccess;
  const std::uint32_t grid = fused_grid(b, sm_count);
  BatchView view = b;
  const std::uint32_t* te0 = t.te0;
  void* args[] = {&view, &te0};
  const void* kernel = b.direct ? reinterpret_cast<const void*>(fused_small_direct) : reinterpret_cast<const void*>(fused_small);
  return cudaLaunchCooperativeKernel(kernel, dim3(grid), dim3(kCtaThreads), args, kCtrSmemBytes, stream);
}

cudaError_t launch_fused_direct(const BatchView& b, DirectHeader& h, std::uint32_t* barrier_count,
                                const DeviceTables& t, int sm_count, cudaStream_t stream) {
  if (b.chunks == 0) return cudaSuccess;
  if (b.chunks > kDirectMaxChunks || !b.direct) return cudaErrorInvalidValue;
  const std::uint32_t grid = fused_grid(b, sm_count);
  h.barrier_target = *barrier_count + grid;
  BatchView view = b;
  const std::uint32_t* te0 = t.te0;
  void* args[] = {&h, &view, &te0};
  const cudaError_t e = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fused_direct), dim3(grid),
                                                    dim3(kCtaThreads), args, kCtrSmemBytes, stream);
  if (e == cudaSuccess) *barrier_count += grid;
  return e;
}

cudaError_t configure_fused_kernels() {
  const void* kernels[] = {reinterpret_cast<const void*>(fused_small), reinterpret_cast<const void*>(fused_direct),
                           reinterpret_cast<const void*>(fused_small_direct)};
  for (const void* k : kernels)
    if (const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kCtrSmemBytes);
        e != cudaSuccess)
      return e;
  return cudaSuccess;
}

}  // namespace gcfs::gpu
