// The CUDA handles (cuda/cuda_handles.h) zero what they held before they free it: the driver hands
// freed device memory to the next allocation as it is, and it may have held key schedules or
// plaintext. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/cuda_handles.h"

namespace gcfs::gpu {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(GpuBuffers, DeviceBufferIsZeroedBeforeItIsFreed) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  constexpr std::size_t kBytes = 1u << 20;
  void* old = nullptr;
  {
    DeviceBuffer b(0, kBytes);
    ASSERT_EQ(cudaMemset(b.get(), 0xab, kBytes), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    old = b.get();
  }
  // The next allocation of the same size gets the same memory back from the driver, unwiped: that
  // is what makes this check meaningful (and what it would see without the zeroing).
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kBytes), cudaSuccess);
  if (p != old) {
    cudaFree(p);
    GTEST_SKIP() << "the driver gave other memory; nothing to compare";
  }
  std::vector<std::uint8_t> host(kBytes, 1);
  ASSERT_EQ(cudaMemcpy(host.data(), p, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(p);
  EXPECT_EQ(std::count(host.begin(), host.end(), 0), static_cast<long>(kBytes)) << "device memory kept its contents";
}

}  // namespace
}  // namespace gcfs::gpu
