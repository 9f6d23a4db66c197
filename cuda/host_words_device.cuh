// How a kernel reads and writes a chunk in the caller's page-locked host memory (the direct and
// resident paths) without touching a byte past the chunk's length: the caller's buffer may end
// there. Device code shared by the kernel files (no relocatable device code: each compiles its own
// copy); include it only from a .cu file.
#pragma once

#include <cstdint>

#include "cuda/gcm_kernels.h"

namespace gcfs::gpu {
namespace {  // each kernel file compiles its own copy (no relocatable device code)

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

}  // namespace
}  // namespace gcfs::gpu
