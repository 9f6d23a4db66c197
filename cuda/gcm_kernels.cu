// AES-256-GCM kernels.
//
// CTR (the keystream): T-tables in shared memory, one private copy per lane so that the 32 lookups
// of a warp always fall in 32 different banks. The four tables Te0..Te3 are laid out so that one
// PRMT instruction turns a state byte into the lookup address:
//
//   region A (64 KiB, 64 KiB aligned): row b = 256 bytes = Te0[b] for lanes 0..31, Te1[b] for lanes 0..31
//   region B (next 64 KiB):            row b = Te2[b] x 32 lanes, Te3[b] x 32 lanes
//
//   address = base | b << 8 | lane << 2   (PRMT of the state word and base|lane<<2)
//
// so a lookup is PRMT + LDS [addr + immediate] (0, 128, 65536, 65664): the table index costs one
// integer instruction where the usual layout needs three (extract, scale, add, plus a rotate for a
// single-table design). AES-256 is then 16 PRMT, 16 LDS and 8 LOP3 per round and block, which is
// the shared-memory bound: 14 x 16 lookups x 4 bytes over 128 bytes per clock per SM.
//
// GHASH: see gcm_layout.h. Per-key nibble tables of H^(2^l) in global memory (read through L1);
// each 4-bit lookup reads 8 bytes from one 128-byte line, so a warp needs no more L1 wavefronts
// than the data it receives.
#include "cuda/gcm_kernels.h"

namespace gcfs::gpu {
namespace {

constexpr int kCtaThreads = 512;
constexpr std::uint32_t kTableBytes = 128 * 1024;
constexpr std::uint32_t kCtrSmemBytes = kTableBytes + 64 * 1024;  // room to align to 64 KiB
constexpr int kGhashCtaThreads = 256;
// Up to this many segments (four per SM: 48 KiB of tables each) a batch hashes with the tables in
// shared memory; beyond it, L1 serves the tables well enough and occupancy matters more.
constexpr std::uint32_t kGhashSharedMaxSegments = 4 * 132;

template <int Offset>
__device__ __forceinline__ std::uint32_t lds(std::uint32_t addr) {
  std::uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1+%2];" : "=r"(v) : "r"(addr), "n"(Offset));
  return v;
}

__device__ __forceinline__ void sts128(std::uint32_t addr, std::uint32_t v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(addr), "r"(v));
}

// Byte k of w becomes bits 8..15 of the address; bits 0..7 and 16..31 come from yb (lane, base).
template <int K>
__device__ __forceinline__ std::uint32_t idx(std::uint32_t w, std::uint32_t yb) {
  return __byte_perm(w, yb, 0x7604 | (K << 4));
}

constexpr int kT0 = 0, kT1 = 128, kT2 = 65536, kT3 = 65536 + 128;

__device__ __forceinline__ std::uint32_t tables_base(const unsigned char* smem) {
  const auto s = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  return (s + 0xFFFFu) & ~0xFFFFu;
}

__device__ void fill_tables(std::uint32_t tab, const std::uint32_t* __restrict__ te0) {
  // 256 rows x 16 sixteen-byte stores per region; each store replicates one word 4 times.
  for (int i = threadIdx.x; i < 256 * 16; i += blockDim.x) {
    const int row = i >> 4, q = i & 15;
    const std::uint32_t t = __ldg(te0 + row);
    const std::uint32_t a = q < 8 ? t : rotl32(t, 8);
    const std::uint32_t b = q < 8 ? rotl32(t, 16) : rotl32(t, 24);
    sts128(tab + row * 256 + q * 16, a);
    sts128(tab + 65536 + row * 256 + q * 16, b);
  }
}

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

__device__ __forceinline__ void aes_round(std::uint32_t s[4], uint4 k, std::uint32_t yb) {
  const std::uint32_t t0 = k.x ^ lds<kT0>(idx<0>(s[0], yb)) ^ lds<kT1>(idx<1>(s[1], yb)) ^
                           lds<kT2>(idx<2>(s[2], yb)) ^ lds<kT3>(idx<3>(s[3], yb));
  const std::uint32_t t1 = k.y ^ lds<kT0>(idx<0>(s[1], yb)) ^ lds<kT1>(idx<1>(s[2], yb)) ^
                           lds<kT2>(idx<2>(s[3], yb)) ^ lds<kT3>(idx<3>(s[0], yb));
  const std::uint32_t t2 = k.z ^ lds<kT0>(idx<0>(s[2], yb)) ^ lds<kT1>(idx<1>(s[3], yb)) ^
                           lds<kT2>(idx<2>(s[0], yb)) ^ lds<kT3>(idx<3>(s[1], yb));
  const std::uint32_t t3 = k.w ^ lds<kT0>(idx<0>(s[3], yb)) ^ lds<kT1>(idx<1>(s[0], yb)) ^
                           lds<kT2>(idx<2>(s[1], yb)) ^ lds<kT3>(idx<3>(s[2], yb));
  s[0] = t0, s[1] = t1, s[2] = t2, s[3] = t3;
}

// Last round: S(x) is byte 0 of Te2, byte 1 of Te3, byte 2 of Te0, byte 3 of Te1, exactly the
// byte each output position needs, so every lookup keeps its usual table and a mask selects.
__device__ __forceinline__ std::uint32_t last_column(std::uint32_t a, std::uint32_t b, std::uint32_t c,
                                                     std::uint32_t d, std::uint32_t k, std::uint32_t yb) {
  return k ^ ((lds<kT2>(idx<0>(a, yb)) & 0xffu) | (lds<kT3>(idx<1>(b, yb)) & 0xff00u) |
              (lds<kT0>(idx<2>(c, yb)) & 0xff0000u) | (lds<kT1>(idx<3>(d, yb)) & 0xff000000u));
}

__device__ __forceinline__ void aes_last_round(std::uint32_t s[4], uint4 k, std::uint32_t yb) {
  const std::uint32_t t0 = last_column(s[0], s[1], s[2], s[3], k.x, yb);
  const std::uint32_t t1 = last_column(s[1], s[2], s[3], s[0], k.y, yb);
  const std::uint32_t t2 = last_column(s[2], s[3], s[0], s[1], k.z, yb);
  const std::uint32_t t3 = last_column(s[3], s[0], s[1], s[2], k.w, yb);
  s[0] = t0, s[1] = t1, s[2] = t2, s[3] = t3;
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

// Word col of block blk of a chunk of len bytes in host memory, reading none of the bytes past
// len (the caller's buffer may end there). The chunk starts 4-byte aligned.
__device__ __forceinline__ std::uint32_t load_host_word(const std::uint8_t* p, std::uint32_t len, std::uint32_t byte) {
  if (byte + 4 <= len) return *reinterpret_cast<const std::uint32_t*>(p + byte);
  std::uint32_t w = 0;
  for (std::uint32_t i = 0; byte + i < len && i < 4; ++i) w |= std::uint32_t(p[byte + i]) << (8 * i);
  return w;
}
__device__ __forceinline__ void store_host_word(std::uint8_t* p, std::uint32_t len, std::uint32_t byte, std::uint32_t w) {
  if (byte + 4 <= len) {
    *reinterpret_cast<std::uint32_t*>(p + byte) = w;
    return;
  }
  for (std::uint32_t i = 0; byte + i < len && i < 4; ++i) p[byte + i] = std::uint8_t(w >> (8 * i));
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

template <int BPT>
__global__ void __launch_bounds__(kCtaThreads, 1) ctr_fine(BatchView b, const std::uint32_t* __restrict__ te0) {
  extern __shared__ __align__(16) unsigned char smem[];
  const std::uint32_t tab = tables_base(smem);
  fill_tables(tab, te0);
  __syncthreads();
  ctr_fine_body<BPT>(b, tab);
}

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
constexpr std::uint32_t kGhashSharedBytes = kPowerTables * kNibbleTableBytes;
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

// ---- The resident worker (gcm_kernels.h: ResidentView) ----
//
// Loads and stores of the ring and of the callers' memory are to page-locked host memory that the
// host changes while the kernel runs: the ring's words go through the system-scope acquire and
// release forms, the data through volatile loads (.cv: never served from a cache a previous round
// filled). Key material goes through L2 (.cg), never the read-only path, since a slot may be
// loaded with another key between two rounds.
__device__ __forceinline__ std::uint64_t ld_acquire_sys(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ std::uint32_t ld_relaxed_sys(const std::uint32_t* p) {
  std::uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ std::uint64_t globaltimer() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void st_release_sys(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Block blk of a chunk of len bytes in host memory, zero-padded, reading no byte past len.
__device__ __forceinline__ uint4 load_host_block(const std::uint8_t* p, std::uint32_t len, std::uint32_t blk, bool vec) {
  const std::uint32_t at = blk * 16;
  if (vec && at + 16 <= len) return __ldcv(reinterpret_cast<const uint4*>(p + at));
  std::uint32_t w[4] = {0, 0, 0, 0};
  const volatile std::uint8_t* q = p + at;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (at + 4 * k + 4 <= len) {
      w[k] = *reinterpret_cast<const volatile std::uint32_t*>(q + 4 * k);  // chunks start 4-byte aligned
    } else {
      for (std::uint32_t i = 0; at + 4 * k + i < len && i < 4; ++i) w[k] |= std::uint32_t(q[4 * k + i]) << (8 * i);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void store_host_block(std::uint8_t* p, std::uint32_t len, std::uint32_t blk, bool vec, uint4 y) {
  const std::uint32_t at = blk * 16;
  if (vec && at + 16 <= len) {
    *reinterpret_cast<uint4*>(p + at) = y;
    return;
  }
  const std::uint32_t w[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) store_host_word(p, len, at + 4 * k, w[k]);
}

// CTR over blocks [first, nblocks) of one chunk (all of it, or a part) by the whole CTA: lane l of
// warp w takes blocks first + w * 32 * BPT + l + 32 k (and the same again every pass of all warps);
// the ciphertext also goes to `text` (indexed by the chunk's block) for GHASH.
template <int BPT>
__device__ __forceinline__ void resident_ctr(const ChunkDesc& d, const uint4* rk, std::uint8_t* text, bool open,
                                             std::uint32_t yb, std::uint8_t* stage, std::uint32_t first,
                                             std::uint32_t nblocks) {
  const std::uint32_t len = d.len;
  const auto* in = reinterpret_cast<const std::uint8_t*>(d.host_in);
  auto* out = reinterpret_cast<std::uint8_t*>(d.host_out);
  const bool vec = ((d.host_in | d.host_out) & 15) == 0;
  const std::uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const std::uint32_t n0 = d.nonce[0], n1 = d.nonce[1], n2 = d.nonce[2];
  for (std::uint32_t base = first + warp * 32 * BPT; base < nblocks; base += warps * 32 * BPT) {
    uint4 x[BPT];
    std::uint32_t s[BPT][4];
    const uint4 k0 = rk[0];
#pragma unroll
    for (int k = 0; k < BPT; ++k) {
      const std::uint32_t blk = base + lane + 32 * k;
      x[k] = blk < nblocks ? load_host_block(in, len, blk, vec) : make_uint4(0, 0, 0, 0);
      s[k][0] = n0 ^ k0.x, s[k][1] = n1 ^ k0.y, s[k][2] = n2 ^ k0.z, s[k][3] = bswap32(blk + 2) ^ k0.w;
    }
#pragma unroll
    for (int r = 1; r < kAesRounds; ++r) {
      const uint4 kr = rk[r];
#pragma unroll
      for (int k = 0; k < BPT; ++k) aes_round(s[k], kr, yb);
    }
    const uint4 kl = rk[kAesRounds];
#pragma unroll
    for (int k = 0; k < BPT; ++k) {
      aes_last_round(s[k], kl, yb);
      const std::uint32_t blk = base + lane + 32 * k;
      if (blk >= nblocks) continue;
      const uint4 y = make_uint4(x[k].x ^ s[k][0], x[k].y ^ s[k][1], x[k].z ^ s[k][2], x[k].w ^ s[k][3]);
      if (stage) reinterpret_cast<uint4*>(stage)[blk] = y;  // in place: the caller's buffer later
      else store_host_block(out, len, blk, vec, y);
      reinterpret_cast<uint4*>(text)[blk] = open ? x[k] : y;
    }
  }
}

__global__ void __launch_bounds__(kCtaThreads, 1) resident_worker(ResidentView v, const std::uint32_t* __restrict__ te0) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ ChunkDesc desc;
  __shared__ uint4 round_keys[kAesRounds + 1];
  __shared__ std::uint32_t segment_prefix[2];
  __shared__ std::uint64_t ticket;
  __shared__ int quit;
  __shared__ std::uint64_t tables_of;  // the key load whose GHASH tables are in smem (0: none)
  __shared__ Block128 tag_mask, partial[kCtaThreads / 32];
  __shared__ std::uint32_t tag_ok, in_place, part, parts;
  const std::uint32_t tab = tables_base(smem);
  fill_tables(tab, te0);
  // The GHASH tables go in whichever gap the T-tables' 64 KiB alignment leaves in the dynamic
  // shared memory, when one is large enough (then each multiply waits on shared memory, not L2).
  const std::uint32_t start = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  std::uint32_t* ghash_tables = nullptr;
  if (tab - start >= kGhashSharedBytes) ghash_tables = reinterpret_cast<std::uint32_t*>(smem);
  else if (start + kCtrSmemBytes - (tab + kTableBytes) >= kGhashSharedBytes)
    ghash_tables = reinterpret_cast<std::uint32_t*>(smem + (tab + kTableBytes - start));
  if (threadIdx.x == 0) tables_of = 0;
  const std::uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const std::uint32_t yb = tab | (lane << 2);
  std::uint8_t* text = v.text + static_cast<std::size_t>(blockIdx.x) * kMaxGpuChunkBytes;
  std::uint8_t* stage = v.stage + static_cast<std::size_t>(blockIdx.x) * kMaxGpuChunkBytes;
  for (;;) {
    __syncthreads();  // the last round is over (and, the first time, the tables are filled)
    if (threadIdx.x == 0) {
      // Only the CTA waiting for the next ticket to be published asks the host (one load over the
      // bus at a time); the others wait on its answer in device memory. Dozens of CTAs polling host
      // memory at once slowed every chunk in flight several times over (their loads and the
      // chunks' share the GPU's path to host memory).
      const std::uint64_t t = atomicAdd(v.next_ticket, 1ull);
      const ResidentEntry* e = v.ring + (t & v.ring_mask);
      volatile unsigned long long* known = v.next_ticket + 1;  // tickets published, as far as the GPU knows
      volatile unsigned long long* stopping = v.next_ticket + 2;
      unsigned ns = 64;
      quit = 0;
      for (;;) {
        const std::uint64_t k = *known;
        if (t < k) break;
        if (t == k) {
          const std::uint64_t p = ld_acquire_sys(v.published);
          if (p > t) {
            atomicMax(v.next_ticket + 1, static_cast<unsigned long long>(p));
            break;
          }
          if (ld_relaxed_sys(v.stop)) *stopping = 1;
        }
        if (*stopping) {
          quit = 1;
          break;
        }
        __nanosleep(ns);
        ns = min(ns * 2, 1024u);
      }
      // Published means posted; the entry's own word confirms it (one load, normally at once).
      while (!quit && ld_acquire_sys(&e->posted) != t + 1) __nanosleep(32);
      ticket = t;
    }
    __syncthreads();
    if (quit) return;
    ResidentEntry* e = v.ring + (ticket & v.ring_mask);
    if (v.trace && threadIdx.x == 0) e->stamps[0] = globaltimer();
    if (threadIdx.x < sizeof(ChunkDesc) / 4)
      reinterpret_cast<std::uint32_t*>(&desc)[threadIdx.x] =
          ld_relaxed_sys(reinterpret_cast<const std::uint32_t*>(&e->desc) + threadIdx.x);
    if (threadIdx.x == sizeof(ChunkDesc) / 4) {
      const std::uint32_t flags = ld_relaxed_sys(&e->flags);
      in_place = flags & kResidentInPlace;
      part = resident_part_of(flags);
      parts = resident_parts_of(flags);
    }
    __syncthreads();
    const KeyBlob* key = v.keys + desc.key;
    if (threadIdx.x < kAesRounds + 1)
      round_keys[threadIdx.x] = __ldcg(reinterpret_cast<const uint4*>(key->round_keys) + threadIdx.x);
    // Which load of the slot this key is (never 0, never repeated): data_offset holds its low word.
    const std::uint64_t table_id = static_cast<std::uint64_t>(desc.reserved >> 1) << 32 | desc.data_offset;
    __syncthreads();
    if (threadIdx.x == 0) {
      desc.data_offset = 0;  // the text copy starts at `text`
      segment_prefix[0] = 0;
      segment_prefix[1] = ghash_segments(desc.aad_len, desc.len, resident_segment_blocks(parts));
    }
    const bool open = (desc.reserved & kResidentOpen) != 0;
    if (ghash_tables && tables_of != table_id) {
      const uint4* src = reinterpret_cast<const uint4*>(key->tables);
      uint4* dst = reinterpret_cast<uint4*>(ghash_tables);
      for (std::uint32_t i = threadIdx.x; i < kGhashSharedBytes / 16; i += blockDim.x) dst[i] = __ldcg(src + i);
    }
    __syncthreads();
    if (threadIdx.x == 0) tables_of = table_id;  // read again only after the next barrier
    // A part's GHASH segments and the blocks they hash (the whole chunk when not split).
    std::uint32_t seg_begin, seg_end, blk_begin, blk_end;
    resident_part_range(desc.aad_len, desc.len, part, parts, &seg_begin, &seg_end, &blk_begin, &blk_end);
    resident_ctr<4>(desc, round_keys, text, open, yb, in_place ? stage : nullptr, blk_begin, blk_end);
    if (v.trace && threadIdx.x == 0) e->stamps[3] = globaltimer();
    if (warp == 0) {  // E_K(J0), the tag mask; every lane computes it, lane 0 keeps it
      const uint4 k0 = round_keys[0];
      std::uint32_t s[4] = {desc.nonce[0] ^ k0.x, desc.nonce[1] ^ k0.y, desc.nonce[2] ^ k0.z, bswap32(1) ^ k0.w};
#pragma unroll 1
      for (int r = 1; r < kAesRounds; ++r) aes_round(s, round_keys[r], yb);
      aes_last_round(s, round_keys[kAesRounds], yb);
      if (lane == 0) tag_mask = Block128{{s[0], s[1], s[2], s[3]}};
    }
    __syncthreads();  // the text and the tag mask are written
    if (v.trace && threadIdx.x == 0) e->stamps[1] = globaltimer();

    BatchView b;
    b.descs = &desc;
    b.chunks = 1;
    b.segment_prefix = segment_prefix;
    b.segments = segment_prefix[1];
    b.segment_blocks = resident_segment_blocks(parts);
    b.keys = v.keys;
    b.in = text;
    b.out = text;
    b.open = open;
    b.direct = true;  // GHASH reads `out`: the ciphertext's copy in device memory
    // Each warp sums its segments' hashes; the CTA adds the warps' sums in shared memory (no global
    // atomics, no fences: those made the GHASH of one chunk take tens of microseconds).
    Block128 sum{{0, 0, 0, 0}};
    if (ghash_tables) {
      for (std::uint32_t seg = seg_begin + warp; seg < seg_end; seg += warps)
        sum = xor128(sum, ghash_segment_hash<true>(b, seg, 0, lane, [ghash_tables](const Block128& x, int l) {
                       return mul_table_shared(x, ghash_tables + l * kNibbleTableWords);
                     }));
    } else {
      for (std::uint32_t seg = seg_begin + warp; seg < seg_end; seg += warps)
        sum = xor128(sum, ghash_segment_hash<true>(b, seg, 0, lane, [key](const Block128& x, int l) {
                       return mul_table_l2(x, key->tables[l]);
                     }));
    }
    if (lane == 0) partial[warp] = sum;
    __syncthreads();
    if (warp == 0) {
      Block128 h = lane < warps ? partial[lane] : Block128{{0, 0, 0, 0}};
#pragma unroll
      for (int o = 16; o; o >>= 1) h = xor128(h, shfl_xor_block(h, o));
      if (lane == 0) {
        bool last = true;
        if (parts > 1) {  // add this part's hash to the chunk's sum; the last part to come takes it
          ChunkScratch* s = v.part_sums + ((ticket - part) & v.ring_mask);
#pragma unroll
          for (int k = 0; k < 4; ++k) atomicXor(&s->acc.w[k], h.w[k]);
          __threadfence();
          last = atomicAdd(&s->segments_done, 1u) == parts - 1;
          if (last) {
            __threadfence();  // the other parts' sums and their stores to the caller's memory come first
#pragma unroll
            for (int k = 0; k < 4; ++k) h.w[k] = atomicExch(&s->acc.w[k], 0u);  // zeros for the next chunk
            atomicExch(&s->segments_done, 0u);
          }
        }
        std::uint32_t ok = 1;
        if (last) {
          const Block128 tag = xor128(h, tag_mask);
          if (!open) {
            e->tag = tag;
          } else {
            std::uint32_t diff = 0;  // constant time: no early exit on the first differing word
#pragma unroll
            for (int k = 0; k < 4; ++k) diff |= tag.w[k] ^ desc.expected_tag.w[k];
            ok = diff == 0;
            e->ok = ok;
          }
        }
        e->last_part = last;
        tag_ok = ok;
      }
    }
    __syncthreads();
    // A chunk that fails its tag leaves zeros in the caller's buffer, never plaintext (all of the
    // chunk: the other parts, done before the last one, wrote theirs already).
    if (!tag_ok) {
      auto* plain = reinterpret_cast<std::uint8_t*>(desc.host_out);
      for (std::uint32_t i = threadIdx.x; i < (desc.len + 3) / 4; i += blockDim.x) store_host_word(plain, desc.len, 4 * i, 0);
    } else if (in_place) {  // the result, now that the chunk is done, over its input
      auto* out = reinterpret_cast<std::uint8_t*>(desc.host_out);
      const bool vec = (desc.host_out & 15) == 0;
      for (std::uint32_t blk = threadIdx.x; blk < blocks_of(desc.len); blk += blockDim.x)
        store_host_block(out, desc.len, blk, vec, __ldcg(reinterpret_cast<const uint4*>(stage) + blk));
    }
    // Every thread's stores to the caller's memory and the entry happen before thread 0's release
    // (the barrier orders them within the CTA; the release at system scope is cumulative). One
    // system fence per chunk: a fence in every thread made each chunk wait hundreds of microseconds.
    __syncthreads();
    if (threadIdx.x == 0) {
      if (v.trace) e->stamps[4] = globaltimer();
      __threadfence_system();
      if (v.trace) e->stamps[2] = globaltimer();
      st_release_sys(&e->done, ticket + 1);
    }
  }
}

__global__ void empty_kernel() {}

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

// CTAs of a fused launch: enough for the CTR tasks or one per GHASH segment, at most one per SM
// (a cooperative launch needs them all resident at once).
static std::uint32_t fused_grid(const BatchView& b, int sm_count) {
  const std::uint32_t warps_per_cta = kCtaThreads / 32;
  const std::uint32_t ctr_ctas = (b.ctr_tasks + warps_per_cta - 1) / warps_per_cta;
  return std::max(1u, std::min<std::uint32_t>(static_cast<std::uint32_t>(sm_count), std::max(ctr_ctas, b.segments)));
}

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

cudaError_t launch_resident(const ResidentView& v, const DeviceTables& t, int ctas, cudaStream_t stream) {
  resident_worker<<<ctas, kCtaThreads, kCtrSmemBytes, stream>>>(v, t.te0);
  return cudaGetLastError();
}

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t configure_kernels() {
  const void* kernels[] = {reinterpret_cast<const void*>(ctr_coarse<1>), reinterpret_cast<const void*>(ctr_coarse<2>),
                           reinterpret_cast<const void*>(ctr_coarse<4>), reinterpret_cast<const void*>(ctr_fine<2>),
                           reinterpret_cast<const void*>(fused_small), reinterpret_cast<const void*>(fused_direct),
                           reinterpret_cast<const void*>(fused_small_direct), reinterpret_cast<const void*>(resident_worker)};
  for (const void* k : kernels)
    if (const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kCtrSmemBytes);
        e != cudaSuccess)
      return e;
  if (const cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void*>(ghash_kernel_shared),
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, kGhashSharedBytes);
      e != cudaSuccess)
    return e;
  // Every other kernel loaded now, not on its first launch: with lazy module loading (the CUDA 12
  // default), a first launch may wait for the whole device to go idle, which it never does while a
  // resident worker runs.
  cudaFuncAttributes attributes;
  for (const void* k : {reinterpret_cast<const void*>(ghash_kernel), reinterpret_cast<const void*>(empty_kernel)})
    if (const cudaError_t e = cudaFuncGetAttributes(&attributes, k); e != cudaSuccess) return e;
  return cudaSuccess;
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

}  // namespace gcfs::gpu
