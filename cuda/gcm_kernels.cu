// What the kernel files share at run time: each kernel's settings, made once per device before any
// launch, and the empty kernel the transfer probe times. The kernels themselves live by path:
// batch_kernels.cu (CTR then GHASH, two launches), fused_kernels.cu (one cooperative launch for
// small batches) and resident_kernel.cu (the worker that stays on the GPU); their device code
// shared is in aes_device.cuh, ctr_device.cuh, ghash_device.cuh and host_words_device.cuh.
#include "cuda/gcm_kernels.h"

namespace gcfs::gpu {
namespace {

__global__ void empty_kernel() {}

}  // namespace

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t configure_kernels() {
  if (const cudaError_t e = configure_batch_kernels(); e != cudaSuccess) return e;
  if (const cudaError_t e = configure_fused_kernels(); e != cudaSuccess) return e;
  if (const cudaError_t e = configure_resident_kernel(); e != cudaSuccess) return e;
  // Every other kernel loaded now, not on its first launch: with lazy module loading (the CUDA 12
  // default), a first launch may wait for the whole device to go idle, which it never does while a
  // resident worker runs.
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(empty_kernel));
}

}  // namespace gcfs::gpu
