// AES-256 rounds on the GPU, for the CTR keystream of every kernel: T-tables in shared memory, one
// private copy per lane so that the 32 lookups of a warp always fall in 32 different banks. The four
// tables Te0..Te3 are laid out so that one PRMT instruction turns a state byte into the lookup
// address:
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
// Device code shared by the kernel files (no relocatable device code: each compiles its own
// copy); include it only from a .cu file.
#pragma once

#include <cstdint>

#include "cuda/gcm_kernels.h"

namespace gcfs::gpu {
namespace {  // each kernel file compiles its own copy (no relocatable device code)

// The CTAs of every kernel that holds the T-tables (the CTR, fused and resident kernels).
constexpr int kCtaThreads = 512;
constexpr std::uint32_t kTableBytes = 128 * 1024;
constexpr std::uint32_t kCtrSmemBytes = kTableBytes + 64 * 1024;  // room to align to 64 KiB

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

}  // namespace
}  // namespace gcfs::gpu
