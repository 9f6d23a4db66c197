// The resident worker's kernel (gcm_kernels.h: ResidentView; its host side is resident_queue.h):
// it stays on the GPU, takes chunk ops from a ring in host memory one ticket per CTA, seals or
// opens each chunk (CTR, then GHASH over a device copy of the ciphertext) and answers in the ring.
#include <cstddef>
#include <cstdint>

#include "cuda/aes_device.cuh"
#include "cuda/gcm_kernels.h"
#include "cuda/ghash_device.cuh"
#include "cuda/host_words_device.cuh"

namespace gcfs::gpu {
namespace {

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

// Thread 0 of a CTA: takes the next ticket and waits until its entry is posted, or until the host
// asks the kernel to stop (quit = 1).
__device__ __forceinline__ void resident_take_ticket(const ResidentView& v, std::uint64_t& ticket, int& quit) {
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

// E_K(J0), the tag mask, by warp 0: every lane computes it, lane 0 keeps it.
__device__ __forceinline__ void resident_tag_mask(const ChunkDesc& desc, const uint4* round_keys, std::uint32_t yb,
                                                  std::uint32_t lane, Block128& tag_mask) {
  const uint4 k0 = round_keys[0];
  std::uint32_t s[4] = {desc.nonce[0] ^ k0.x, desc.nonce[1] ^ k0.y, desc.nonce[2] ^ k0.z, bswap32(1) ^ k0.w};
#pragma unroll 1
  for (int r = 1; r < kAesRounds; ++r) aes_round(s, round_keys[r], yb);
  aes_last_round(s, round_keys[kAesRounds], yb);
  if (lane == 0) tag_mask = Block128{{s[0], s[1], s[2], s[3]}};
}

// The sum of the hashes of this warp's segments among [seg_begin, seg_end) of the chunk in b.
__device__ __forceinline__ Block128 resident_warp_hash(const BatchView& b, const KeyBlob* key,
                                                       const std::uint32_t* ghash_tables, std::uint32_t seg_begin,
                                                       std::uint32_t seg_end, std::uint32_t warp,
                                                       std::uint32_t warps, std::uint32_t lane) {
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
  return sum;
}

// Lane 0 of warp 0, with the CTA's hash h of its part: adds it to the chunk's sum when the chunk is
// split, and if this part is the chunk's last, writes the tag (seal) or the verdict (open) into the
// entry. Returns whether the chunk may leave the GPU (0: its tag did not match).
__device__ __forceinline__ std::uint32_t resident_answer(const ResidentView& v, ResidentEntry* e, const ChunkDesc& desc,
                                                         Block128 h, const Block128& tag_mask, std::uint64_t ticket,
                                                         std::uint32_t part, std::uint32_t parts, bool open) {
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
  return ok;
}

// By the whole CTA, once the chunk is answered: a chunk that fails its tag leaves zeros in the
// caller's buffer, never plaintext (all of the chunk: the other parts, done before the last one,
// wrote theirs already); an in-place chunk's result goes over its input now that it is done.
__device__ __forceinline__ void resident_write_back(const ChunkDesc& desc, const std::uint8_t* stage,
                                                    std::uint32_t tag_ok, std::uint32_t in_place) {
  if (!tag_ok) {
    auto* plain = reinterpret_cast<std::uint8_t*>(desc.host_out);
    for (std::uint32_t i = threadIdx.x; i < (desc.len + 3) / 4; i += blockDim.x) store_host_word(plain, desc.len, 4 * i, 0);
  } else if (in_place) {
    auto* out = reinterpret_cast<std::uint8_t*>(desc.host_out);
    const bool vec = (desc.host_out & 15) == 0;
    for (std::uint32_t blk = threadIdx.x; blk < blocks_of(desc.len); blk += blockDim.x)
      store_host_block(out, desc.len, blk, vec, __ldcg(reinterpret_cast<const uint4*>(stage) + blk));
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
    if (threadIdx.x == 0) resident_take_ticket(v, ticket, quit);
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
    if (warp == 0) resident_tag_mask(desc, round_keys, yb, lane, tag_mask);
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
    const Block128 sum = resident_warp_hash(b, key, ghash_tables, seg_begin, seg_end, warp, warps, lane);
    if (lane == 0) partial[warp] = sum;
    __syncthreads();
    if (warp == 0) {
      Block128 h = lane < warps ? partial[lane] : Block128{{0, 0, 0, 0}};
#pragma unroll
      for (int o = 16; o; o >>= 1) h = xor128(h, shfl_xor_block(h, o));
      if (lane == 0) tag_ok = resident_answer(v, e, desc, h, tag_mask, ticket, part, parts, open);
    }
    __syncthreads();
    resident_write_back(desc, stage, tag_ok, in_place);
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

}  // namespace

cudaError_t launch_resident(const ResidentView& v, const DeviceTables& t, int ctas, cudaStream_t stream) {
  resident_worker<<<ctas, kCtaThreads, kCtrSmemBytes, stream>>>(v, t.te0);
  return cudaGetLastError();
}

cudaError_t configure_resident_kernel() {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(resident_worker), cudaFuncAttributeMaxDynamicSharedMemorySize,
                              kCtrSmemBytes);
}

}  // namespace gcfs::gpu
