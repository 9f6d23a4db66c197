// The AES Te0 table built once on the host from the shared math, for key preparation, the
// reference paths and the tables the kernels copy into shared memory.
#pragma once

#include <array>
#include <cstdint>

#include "cuda/gcm_math.h"

namespace gcfs::gpu {

inline const std::array<std::uint32_t, 256>& host_te0() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (int x = 0; x < 256; ++x) t[x] = aes_te0(static_cast<std::uint8_t>(x));
    return t;
  }();
  return table;
}

}  // namespace gcfs::gpu
