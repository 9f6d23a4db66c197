// The batch kernels of the gpu engine's two-launch path: a CTR kernel (coarse or fine, gcm_kernels.h:
// CtrVariant) over the whole batch, then a GHASH kernel over its segments, with the launches that
// run them (launch_seal, launch_open) and the variants' task sizes.
#include <algorithm>
#include <string>

#include "cuda/aes_device.cuh"
#include "cuda/ctr_device.cuh"
#include "cuda/gcm_kernels.h"
#include "cuda/ghash_device.cuh"

namespace gcfs::gpu {
namespace {

constexpr int kGhashCtaThreads = 256;
// Up to this many segments (four per SM: 48 KiB of tables each) a batch hashes with the tables in
// shared memory; beyond it, L1 serves the tables well enough and occupancy matters more.
constexpr std::uint32_t kGhashSharedMaxSegments = 4 * 132;

// One thread per AES block, BPT blocks per thread in flight together (independent lookups hide
// the shared-memory latency). A warp task is 32*BPT consecutive blocks of one chunk, lane l taking
// blocks l, l+32, ...: every load and store is a coalesced 16-byte access.
template <int BPT>
__global__ void __launch_bounds__(kCtaThreads, 1) ctr_coarse(BatchView b, const std::uint32_t* __restrict__ te0) {
  extern __shared__ __align__(16) unsigned char smem[];
  const std::uint32_t tab = tables_base(smem);
  fill_tables(tab, te0);
  __syncthreads();
  const std::uint32_t lane = threadIdx.x & 31;
  const std::uint32_t yb = tab | (lane << 2);
  for_each_ctr_task(b, yb, [&](std::uint32_t c, std::uint32_t task_in_chunk) {
    const ChunkDesc* d = b.descs + c;
    const std::uint32_t nblocks = blocks_of(d->len);
    const std::uint32_t first = task_in_chunk * (32 * BPT);
    const uint4* src = reinterpret_cast<const uint4*>(b.in + d->data_offset);
    uint4* dst = reinterpret_cast<uint4*>(b.out + d->data_offset);
    const uint4* rk = reinterpret_cast<const uint4*>(b.keys[d->key].round_keys);
    const std::uint32_t n0 = d->nonce[0], n1 = d->nonce[1], n2 = d->nonce[2];

    uint4 x[BPT];
    std::uint32_t s[BPT][4];
    const uint4 k0 = __ldg(rk);
#pragma unroll
    for (int k = 0; k < BPT; ++k) {
      const std::uint32_t blk = first + lane + 32 * k;
      if (blk < nblocks) x[k] = src[blk];
      s[k][0] = n0 ^ k0.x, s[k][1] = n1 ^ k0.y, s[k][2] = n2 ^ k0.z, s[k][3] = bswap32(blk + 2) ^ k0.w;
    }
#pragma unroll
    for (int r = 1; r < kAesRounds; ++r) {
      const uint4 kr = __ldg(rk + r);
#pragma unroll
      for (int k = 0; k < BPT; ++k) aes_round(s[k], kr, yb);
    }
    const uint4 kl = __ldg(rk + kAesRounds);
#pragma unroll
    for (int k = 0; k < BPT; ++k) {
      aes_last_round(s[k], kl, yb);
      const std::uint32_t blk = first + lane + 32 * k;
      if (blk < nblocks)
        dst[blk] = make_uint4(x[k].x ^ s[k][0], x[k].y ^ s[k][1], x[k].z ^ s[k][2], x[k].w ^ s[k][3]);
    }
  });
}

template <int BPT>
__global__ void __launch_bounds__(kCtaThreads, 1) ctr_fine(BatchView b, const std::uint32_t* __restrict__ te0) {
  extern __shared__ __align__(16) unsigned char smem[];
  const std::uint32_t tab = tables_base(smem);
  fill_tables(tab, te0);
  __syncthreads();
  ctr_fine_body<BPT>(b, tab);
}

// Throughput form: eight warps per CTA, tables read through L1 (many segments share a key).
__global__ void __launch_bounds__(kGhashCtaThreads) ghash_kernel(BatchView b) {
  const std::uint32_t seg = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (seg >= b.segments) return;
  const std::uint32_t c = find_chunk(b.segment_prefix, b.chunks, seg);
  const KeyBlob* key = b.keys + b.descs[c].key;
  ghash_segment(b, seg, c, threadIdx.x & 31, [key](const Block128& x, int l) { return mul_table_global(x, key->tables[l]); });
}

// Latency form, for small batches: one warp per CTA copies its key's tables into shared memory
// first (one parallel load), so each of the ~15 dependent multiplies of a lane's chain waits on
// shared memory instead of a trip to L2 or HBM.
__global__ void __launch_bounds__(32) ghash_kernel_shared(BatchView b) {
  extern __shared__ __align__(16) std::uint32_t tables[];
  const std::uint32_t seg = blockIdx.x, lane = threadIdx.x;
  const std::uint32_t c = find_chunk(b.segment_prefix, b.chunks, seg);
  const uint4* src = reinterpret_cast<const uint4*>(b.keys[b.descs[c].key].tables);
  uint4* dst = reinterpret_cast<uint4*>(tables);
  for (std::uint32_t i = lane; i < kGhashSharedBytes / 16; i += 32) dst[i] = __ldg(src + i);
  __syncwarp();
  ghash_segment(b, seg, c, lane,
                [](const Block128& x, int l) { return mul_table_shared(x, tables + l * kNibbleTableWords); });
}

cudaError_t launch_ctr(const BatchView& b, CtrVariant v, std::uint32_t task_blocks, const DeviceTables& t,
                       int sm_count, cudaStream_t stream) {
  if (b.ctr_tasks == 0) return cudaSuccess;
  const std::uint32_t warps_per_cta = kCtaThreads / 32;
  const std::uint32_t grid = std::min<std::uint32_t>(static_cast<std::uint32_t>(sm_count),
                                                     (b.ctr_tasks + warps_per_cta - 1) / warps_per_cta);
  if (v == CtrVariant::Coarse) {
    if (task_blocks == 32) ctr_coarse<1><<<grid, kCtaThreads, kCtrSmemBytes, stream>>>(b, t.te0);
    else if (task_blocks == 64) ctr_coarse<2><<<grid, kCtaThreads, kCtrSmemBytes, stream>>>(b, t.te0);
    else if (task_blocks == 128) ctr_coarse<4><<<grid, kCtaThreads, kCtrSmemBytes, stream>>>(b, t.te0);
    else return cudaErrorInvalidValue;
  } else {
    if (task_blocks == 16) ctr_fine<2><<<grid, kCtaThreads, kCtrSmemBytes, stream>>>(b, t.te0);
    else return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_ghash(const BatchView& b, cudaStream_t stream) {
  if (b.chunks == 0) return cudaSuccess;
  if (b.segments <= kGhashSharedMaxSegments) {
    ghash_kernel_shared<<<b.segments, 32, kGhashSharedBytes, stream>>>(b);
    return cudaGetLastError();
  }
  const std::uint32_t warps_per_cta = kGhashCtaThreads / 32;
  const std::uint32_t grid = (b.segments + warps_per_cta - 1) / warps_per_cta;
  ghash_kernel<<<grid, kGhashCtaThreads, 0, stream>>>(b);
  return cudaGetLastError();
}

}  // namespace

bool parse_variant(const std::string& name, CtrVariant* out) {
  if (name == "coarse") return *out = CtrVariant::Coarse, true;
  if (name == "fine") return *out = CtrVariant::Fine, true;
  return false;
}

std::uint32_t ctr_task_blocks(CtrVariant v, std::uint64_t total_blocks, int sm_count) {
  if (v == CtrVariant::Fine) return 16;
  // Enough blocks for every SM's 16 warps to get several tasks of 4 blocks per lane: take the
  // wide tasks (more lookups in flight per thread); otherwise narrow ones that spread further.
  const std::uint64_t lanes = static_cast<std::uint64_t>(sm_count) * kCtaThreads;
  if (total_blocks >= lanes * 4 * 2) return 128;
  if (total_blocks >= lanes * 2 * 2) return 64;
  return 32;
}

cudaError_t launch_seal(const BatchView& b, CtrVariant v, std::uint32_t task_blocks, const DeviceTables& t,
                        int sm_count, cudaStream_t stream) {
  if (const cudaError_t e = launch_ctr(b, v, task_blocks, t, sm_count, stream); e != cudaSuccess) return e;
  return launch_ghash(b, stream);
}

cudaError_t launch_open(const BatchView& b, CtrVariant v, std::uint32_t task_blocks, const DeviceTables& t,
                        int sm_count, cudaStream_t stream) {
  // Decrypt first (the tag mask comes out of the CTR pass), then authenticate; the GHASH kernel
  // zeroes the plaintext of every chunk whose tag does not match, before the copy back.
  if (const cudaError_t e = launch_ctr(b, v, task_blocks, t, sm_count, stream); e != cudaSuccess) return e;
  return launch_ghash(b, stream);
}

cudaError_t launch_ctr_only(const BatchView& b, CtrVariant v, std::uint32_t task_blocks, const DeviceTables& t,
                            int sm_count, cudaStream_t stream) {
  return launch_ctr(b, v, task_blocks, t, sm_count, stream);
}

cudaError_t configure_batch_kernels() {
  const void* kernels[] = {reinterpret_cast<const void*>(ctr_coarse<1>), reinterpret_cast<const void*>(ctr_coarse<2>),
                           reinterpret_cast<const void*>(ctr_coarse<4>), reinterpret_cast<const void*>(ctr_fine<2>)};
  for (const void* k : kernels)
    if (const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kCtrSmemBytes);
        e != cudaSuccess)
      return e;
  if (const cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void*>(ghash_kernel_shared),
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, kGhashSharedBytes);
      e != cudaSuccess)
    return e;
  cudaFuncAttributes attributes;  // loaded now (see configure_kernels)
  return cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(ghash_kernel));
}

}  // namespace gcfs::gpu
