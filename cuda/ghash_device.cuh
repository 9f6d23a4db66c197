// GHASH on the GPU (see gcm_layout.h): per-key nibble tables of H^(2^l) in global memory (read
// through L1), or copied into shared memory by the kernels that wait on latency; each 4-bit lookup
// reads 8 bytes from one 128-byte line, so a warp needs no more L1 wavefronts than the data it
// receives. One warp hashes one segment of a chunk; the warp that finishes a chunk writes its tag
// or its verdict. Device code shared by the kernel files (no relocatable device code: each compiles its own
// copy); include it only from a .cu file.
#pragma once

#include <cstdint>

#include "cuda/gcm_kernels.h"
#include "cuda/host_words_device.cuh"

namespace gcfs::gpu {
namespace {  // each kernel file compiles its own copy (no relocatable device code)

__device__ __forceinline__ Block128 ldg_block(const void* p) {
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  return {{v.x, v.y, v.z, v.w}};
}

// x times H^(2^l) through the nibble table of that power in global memory, each 8-byte entry read
// with load: the read-only path (__ldg) for the batch kernels, L2 only (__ldcg) for the resident
// worker, whose key slots may be reloaded while it runs.
template <class Load>
__device__ __forceinline__ Block128 mul_table_loaded(const Block128& x, const std::uint32_t* __restrict__ table, Load load) {
  Block128 z{{0, 0, 0, 0}};
#pragma unroll
  for (int p = 0; p < 32; ++p) {
    const std::uint32_t off = nibble_offset(x, p);
    const uint2 lo = load(reinterpret_cast<const uint2*>(reinterpret_cast<const char*>(table) + (2 * p) * 128 + off));
    const uint2 hi = load(reinterpret_cast<const uint2*>(reinterpret_cast<const char*>(table) + (2 * p + 1) * 128 + off));
    z.w[0] ^= lo.x, z.w[1] ^= lo.y, z.w[2] ^= hi.x, z.w[3] ^= hi.y;
  }
  return z;
}
__device__ __forceinline__ Block128 mul_table_global(const Block128& x, const std::uint32_t* __restrict__ table) {
  return mul_table_loaded(x, table, [](const uint2* q) { return __ldg(q); });
}
__device__ __forceinline__ Block128 mul_table_l2(const Block128& x, const std::uint32_t* __restrict__ table) {
  return mul_table_loaded(x, table, [](const uint2* q) { return __ldcg(q); });
}

__device__ __forceinline__ Block128 shfl_block(const Block128& v, int src) {
  return {{__shfl_sync(0xffffffffu, v.w[0], src), __shfl_sync(0xffffffffu, v.w[1], src),
           __shfl_sync(0xffffffffu, v.w[2], src), __shfl_sync(0xffffffffu, v.w[3], src)}};
}

__device__ __forceinline__ Block128 shfl_xor_block(const Block128& v, int mask) {
  return {{__shfl_xor_sync(0xffffffffu, v.w[0], mask), __shfl_xor_sync(0xffffffffu, v.w[1], mask),
           __shfl_xor_sync(0xffffffffu, v.w[2], mask), __shfl_xor_sync(0xffffffffu, v.w[3], mask)}};
}

__device__ __forceinline__ Block128 shfl_down_block(const Block128& v, int delta) {
  return {{__shfl_down_sync(0xffffffffu, v.w[0], delta), __shfl_down_sync(0xffffffffu, v.w[1], delta),
           __shfl_down_sync(0xffffffffu, v.w[2], delta), __shfl_down_sync(0xffffffffu, v.w[3], delta)}};
}

// A coherent load (L2, not the read-only path): for data written earlier in the same launch.
__device__ __forceinline__ Block128 ldcg_block(const void* p) {
  const uint4 v = __ldcg(reinterpret_cast<const uint4*>(p));
  return {{v.x, v.y, v.z, v.w}};
}

// Block j of a chunk's GHASH input: AAD blocks, ciphertext blocks (the last one zero-padded),
// then the length block. Coherent: the text was written by this same launch (the fused kernel's
// seal), which the read-only cache path may not serve.
template <bool Coherent = false>
__device__ __forceinline__ Block128 ghash_input(const ChunkDesc* d, const unsigned char* text, std::uint32_t aad_blocks,
                                                std::uint32_t text_blocks, std::uint32_t j) {
  if (j < aad_blocks) {  // from the header: a plain load, since it may sit in the launch's parameters
    const uint4 v = *reinterpret_cast<const uint4*>(d->aad + 16 * j);
    return {{v.x, v.y, v.z, v.w}};
  }
  if (j < aad_blocks + text_blocks) {
    const std::uint32_t i = j - aad_blocks;
    Block128 x = Coherent ? ldcg_block(text + 16 * i) : ldg_block(text + 16 * i);
    const std::uint32_t rem = d->len - 16 * i;
    if (rem < 16) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int valid = static_cast<int>(rem) - 4 * k;
        x.w[k] &= valid >= 4 ? 0xffffffffu : valid <= 0 ? 0u : (1u << (8 * valid)) - 1;
      }
    }
    return x;
  }
  return length_block(d->aad_len, d->len);
}

__device__ __forceinline__ Block128 mul_table_shared(const Block128& x, const std::uint32_t* table) {
  Block128 z{{0, 0, 0, 0}};
#pragma unroll
  for (int p = 0; p < 32; ++p) {
    const std::uint32_t off = nibble_offset(x, p);
    const uint2 lo = *reinterpret_cast<const uint2*>(reinterpret_cast<const char*>(table) + (2 * p) * 128 + off);
    const uint2 hi = *reinterpret_cast<const uint2*>(reinterpret_cast<const char*>(table) + (2 * p + 1) * 128 + off);
    z.w[0] ^= lo.x, z.w[1] ^= lo.y, z.w[2] ^= hi.x, z.w[3] ^= hi.y;
  }
  return z;
}

// One warp hashes one segment (see gcm_layout.h). The warp that completes a chunk's last segment
// masks the hash with E_K(J0) (from the CTR pass) and writes the tag (seal) or the constant-time
// comparison (open); for a chunk that failed it zeroes the plaintext before it can leave the GPU.
// mul(x, l) multiplies by H^(2^l) through the key's table l, wherever the tables are.
// The hash of segment seg (of chunk c) scaled by its distance from the end, in every lane.
template <bool Coherent = false, class Mul>
__device__ __forceinline__ Block128 ghash_segment_hash(const BatchView& b, std::uint32_t seg, std::uint32_t c,
                                                       std::uint32_t lane, Mul mul) {
  const ChunkDesc* d = b.descs + c;
  const std::uint32_t aad_blocks = (d->aad_len + 15) / 16, text_blocks = (d->len + 15) / 16;
  const std::uint32_t total = aad_blocks + text_blocks + 1;
  const std::uint32_t seg0 = b.segment_prefix[c];
  const std::uint32_t nseg = b.segment_prefix[c + 1] - seg0;
  const std::uint32_t u = nseg - 1 - (seg - seg0);  // position from the end
  std::uint32_t begin, end;
  segment_range(total, nseg, u, b.segment_blocks, &begin, &end);
  const std::uint32_t m = end - begin;
  const KeyBlob* key = b.keys + d->key;
  const unsigned char* text = (b.open && !b.direct ? b.in : b.out) + d->data_offset;

  // Horner over the lane's blocks j = begin + lane + 32 i. The loads of kPrefetch blocks are issued
  // together before their multiplies: the chain then waits on memory once per group instead of
  // once per block (each wait is a trip to L2, as long as a multiply or more).
  constexpr int kPrefetch = 4;
  Block128 z{{0, 0, 0, 0}};
  bool started = false;
  for (std::uint32_t j0 = begin + lane; j0 < end; j0 += 32 * kPrefetch) {
    Block128 x[kPrefetch];
#pragma unroll
    for (int q = 0; q < kPrefetch; ++q) {
      const std::uint32_t j = j0 + 32 * q;
      x[q] = j < end ? ghash_input<Coherent>(d, text, aad_blocks, text_blocks, j) : Block128{{0, 0, 0, 0}};
    }
#pragma unroll
    for (int q = 0; q < kPrefetch; ++q) {
      if (j0 + 32 * q >= end) break;
      z = started ? xor128(mul(z, 5), x[q]) : x[q];
      started = true;
    }
  }
  // Lane q takes the partial sum whose blocks need H^(q+1) more, then a tree over lanes.
  Block128 a = shfl_block(z, static_cast<int>((m - 1 - lane) & 31));
#pragma unroll
  for (int l = 0; l < 5; ++l) a = xor128(a, mul(shfl_down_block(a, 1 << l), l));
  a = shfl_block(mul(a, 0), 0);  // lane 0 holds the segment's hash
  if (u > 0) {  // scaled by H^(S u), its distance from the end: one product shared by the 32 lanes
    const Block128* power = &key->segment_power[u * (b.segment_blocks / kSegmentBlocksSmall)];
    Block128 share = gf_mul_lane_share(a, Coherent ? ldcg_block(power) : *power, lane);
#pragma unroll
    for (int o = 16; o; o >>= 1) share = xor128(share, shfl_xor_block(share, o));
    a = share;
  }
  return a;
}

template <bool Coherent = false, class Mul>
__device__ __forceinline__ void ghash_segment(const BatchView& b, std::uint32_t seg, std::uint32_t c,
                                              std::uint32_t lane, Mul mul) {
  const ChunkDesc* d = b.descs + c;
  const std::uint32_t text_blocks = (d->len + 15) / 16;
  const std::uint32_t nseg = b.segment_prefix[c + 1] - b.segment_prefix[c];
  Block128 a = ghash_segment_hash<Coherent>(b, seg, c, lane, mul);

  std::uint32_t finisher = 0, ok = 0;
  if (lane == 0) {
    ChunkScratch* s = b.scratch + c;
    finisher = 1;
    if (nseg > 1) {
#pragma unroll
      for (int k = 0; k < 4; ++k) atomicXor(&s->acc.w[k], a.w[k]);
      __threadfence();
      finisher = atomicAdd(&s->segments_done, 1u) == nseg - 1;
      if (finisher) {
        __threadfence();
        // Read and clear: the next batch finds this scratch zeroed (a direct batch's scratch is
        // not uploaded, it belongs to the stream's slot).
#pragma unroll
        for (int k = 0; k < 4; ++k) a.w[k] = atomicExch(&s->acc.w[k], 0u);
        atomicExch(&s->segments_done, 0u);
      }
    }
    if (finisher) {
      const Block128 tag = xor128(a, Coherent ? ldcg_block(&s->ej0) : s->ej0);
      if (!b.open) {
        b.tags[c] = tag;
      } else {
        std::uint32_t diff = 0;  // constant time: no early exit on the first differing word
#pragma unroll
        for (int k = 0; k < 4; ++k) diff |= tag.w[k] ^ d->expected_tag.w[k];
        ok = diff == 0;
        b.ok[c] = ok;
      }
    }
  }
  finisher = __shfl_sync(0xffffffffu, finisher, 0);
  ok = __shfl_sync(0xffffffffu, ok, 0);
  if (b.open && finisher && !ok) {
    if (b.direct) {  // the caller's buffer: exactly len bytes
      auto* plain = reinterpret_cast<std::uint8_t*>(d->host_out);
      for (std::uint32_t i = lane; i < (d->len + 3) / 4; i += 32) store_host_word(plain, d->len, 4 * i, 0);
    } else {
      uint4* plain = reinterpret_cast<uint4*>(b.out + d->data_offset);
      for (std::uint32_t i = lane; i < text_blocks; i += 32) plain[i] = make_uint4(0, 0, 0, 0);
    }
  }
}

// The bytes of one key's GHASH tables, as the latency-bound kernels copy them into shared memory.
constexpr std::uint32_t kGhashSharedBytes = kPowerTables * kNibbleTableBytes;

}  // namespace
}  // namespace gcfs::gpu
