// The CTR pass of a batch on the GPU: how warps walk the batch's CTR tasks (data tasks, then
// tag-mask tasks: gcm_layout.h), and the fine-grained body (four threads per AES block) that the
// ctr_fine kernel and the fused kernels share. Device code shared by the kernel files (no relocatable device code: each compiles its own
// copy); include it only from a .cu file.
#pragma once

#include <cstdint>

#include "cuda/aes_device.cuh"
#include "cuda/gcm_kernels.h"
#include "cuda/host_words_device.cuh"

namespace gcfs::gpu {
namespace {  // each kernel file compiles its own copy (no relocatable device code)

// The header (descriptors, prefix sums) is read with plain loads throughout, never __ldg: a direct
// batch passes it in the launch's parameters, which the read-only global path cannot reach.
__device__ __forceinline__ std::uint32_t find_chunk(const std::uint32_t* prefix, std::uint32_t chunks,
                                                    std::uint32_t item) {
  std::uint32_t lo = 0, hi = chunks;  // prefix[lo] <= item < prefix[hi]
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) >> 1;
    if (prefix[mid] <= item) lo = mid; else hi = mid;
  }
  return lo;
}

// E_K(J0) for chunk c, one whole block in this lane (lanes of a tag-mask task hold different
// chunks, so their round keys differ: per-lane loads here, a broadcast in the data path).
__device__ __forceinline__ void tag_mask_block(const BatchView& b, std::uint32_t c, std::uint32_t yb) {
  const bool valid = c < b.chunks;
  const ChunkDesc* d = b.descs + (valid ? c : b.chunks - 1);
  const uint4* rk = reinterpret_cast<const uint4*>(b.keys[d->key].round_keys);
  const uint4 k0 = __ldg(rk);
  std::uint32_t s[4] = {d->nonce[0] ^ k0.x, d->nonce[1] ^ k0.y, d->nonce[2] ^ k0.z, bswap32(1) ^ k0.w};
#pragma unroll 1
  for (int r = 1; r < kAesRounds; ++r) aes_round(s, __ldg(rk + r), yb);
  aes_last_round(s, __ldg(rk + kAesRounds), yb);
  if (valid) b.scratch[c].ej0 = Block128{{s[0], s[1], s[2], s[3]}};
}

// The CTR tasks of the calling warp: tag-mask tasks run here, data tasks go to body(chunk, index of
// the task within its chunk). Each warp takes a contiguous run of tasks, so it searches for its
// first chunk once and then walks forward instead of searching (a dozen dependent loads) for
// every task.
template <class Body>
__device__ __forceinline__ void for_each_ctr_task(const BatchView& b, std::uint32_t yb, Body&& body) {
  const std::uint32_t lane = threadIdx.x & 31;
  const std::uint32_t warps = gridDim.x * (blockDim.x / 32);
  const std::uint32_t warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const std::uint32_t per_warp = (b.ctr_tasks + warps - 1) / warps;
  const std::uint32_t task_end = min(b.ctr_tasks, (warp + 1) * per_warp);
  std::uint32_t c = 0, next_chunk_task = 0;
  for (std::uint32_t task = warp * per_warp; task < task_end; ++task) {
    if (task >= b.ctr_data_tasks) {
      tag_mask_block(b, (task - b.ctr_data_tasks) * kMaskTaskChunks + lane, yb);
      continue;
    }
    if (task == warp * per_warp) {
      c = find_chunk(b.ctr_task_prefix, b.chunks, task);
      next_chunk_task = b.ctr_task_prefix[c + 1];
    }
    while (task >= next_chunk_task) next_chunk_task = b.ctr_task_prefix[++c + 1];
    body(c, task - b.ctr_task_prefix[c]);
  }
}

// Four threads per AES block, thread q computing column q of each round from the whole state,
// which it gathers with three shuffles. Four times the threads of the coarse kernel for the same
// batch: the variant for batches too small to occupy 132 SMs.
//
// Direct: the data comes from and goes to the caller's host memory (descriptor host_in/host_out)
// with no copy calls, and the ciphertext (sealed output, or opened input) also goes to the device
// data area, where GHASH reads it without a second trip over the bus.
template <int BPT, bool Direct = false>
__device__ __forceinline__ void ctr_fine_body(const BatchView& b, std::uint32_t tab) {
  const std::uint32_t lane = threadIdx.x & 31, col = lane & 3, grp = lane >> 2, quad = lane & ~3u;
  const std::uint32_t yb = tab | (lane << 2);
  for_each_ctr_task(b, yb, [&](std::uint32_t c, std::uint32_t task_in_chunk) {
    const ChunkDesc* d = b.descs + c;
    const std::uint32_t len = d->len, nblocks = blocks_of(len);
    const std::uint32_t first = task_in_chunk * (8 * BPT);
    const std::uint32_t* src = reinterpret_cast<const std::uint32_t*>(b.in + d->data_offset);
    std::uint32_t* dst = reinterpret_cast<std::uint32_t*>(b.out + d->data_offset);
    const auto* host_in = reinterpret_cast<const std::uint8_t*>(d->host_in);
    auto* host_out = reinterpret_cast<std::uint8_t*>(d->host_out);
    const std::uint32_t* rk = b.keys[d->key].round_keys;
    const std::uint32_t nonce = col == 0 ? d->nonce[0] : col == 1 ? d->nonce[1] : d->nonce[2];

    std::uint32_t x[BPT], s[BPT];
#pragma unroll
    for (int k = 0; k < BPT; ++k) {
      const std::uint32_t blk = first + grp + 8 * k;
      if (Direct) x[k] = blk < nblocks ? load_host_word(host_in, len, blk * 16 + col * 4) : 0;
      else x[k] = blk < nblocks ? src[blk * 4 + col] : 0;
      s[k] = (col == 3 ? bswap32(blk + 2) : nonce) ^ __ldg(rk + col);
    }
#pragma unroll
    for (int r = 1; r <= kAesRounds; ++r) {
      const std::uint32_t kw = __ldg(rk + 4 * r + col);
#pragma unroll
      for (int k = 0; k < BPT; ++k) {
        const std::uint32_t s1 = __shfl_sync(0xffffffffu, s[k], quad | ((col + 1) & 3));
        const std::uint32_t s2 = __shfl_sync(0xffffffffu, s[k], quad | ((col + 2) & 3));
        const std::uint32_t s3 = __shfl_sync(0xffffffffu, s[k], quad | ((col + 3) & 3));
        if (r < kAesRounds)
          s[k] = kw ^ lds<kT0>(idx<0>(s[k], yb)) ^ lds<kT1>(idx<1>(s1, yb)) ^ lds<kT2>(idx<2>(s2, yb)) ^
                 lds<kT3>(idx<3>(s3, yb));
        else
          s[k] = last_column(s[k], s1, s2, s3, kw, yb);
      }
    }
#pragma unroll
    for (int k = 0; k < BPT; ++k) {
      const std::uint32_t blk = first + grp + 8 * k;
      if (blk >= nblocks) continue;
      const std::uint32_t y = x[k] ^ s[k];
      if (Direct) {
        store_host_word(host_out, len, blk * 16 + col * 4, y);
        dst[blk * 4 + col] = b.open ? x[k] : y;  // the ciphertext, for GHASH
      } else {
        dst[blk * 4 + col] = y;
      }
    }
  });
}

}  // namespace
}  // namespace gcfs::gpu
