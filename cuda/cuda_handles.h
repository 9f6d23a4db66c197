// RAII for the CUDA runtime's handles: device and pinned buffers, streams, events. Each owner
// remembers its device, because the runtime's current device is per thread and the gpu engine's
// callers are many threads.
//
// Buffers hold key schedules and plaintext, so both kinds are zeroed before they are freed: the
// driver hands freed memory to the next allocation as it is. The cost is paid once per buffer, at
// free, never per batch. An owner frees a buffer only when no work on it is in flight (the gpu
// engine synchronizes its devices first), as cudaFree and cudaFreeHost already require.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "crypto/secret.h"

namespace gcfs::gpu {

struct CudaError : std::runtime_error {
  CudaError(const std::string& what, cudaError_t code)
      : std::runtime_error(what + ": " + cudaGetErrorString(code)), code(code) {}
  cudaError_t code;
};

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(what, e);
}

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept { swap(o); return *this; }
  ~DeviceBuffer() {
    if (ptr_) {
      cudaSetDevice(device_);
      // cudaMemset may return before the zeros are written: wait for them before the free. Errors
      // are ignored; after a sticky error the context can do nothing more (zeroing included).
      cudaMemset(ptr_, 0, bytes_);
      cudaDeviceSynchronize();
      cudaFree(ptr_);
    }
  }
  template <class T = unsigned char>
  T* get() const { return static_cast<T*>(ptr_); }
  std::size_t size() const { return bytes_; }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(device_, o.device_), std::swap(ptr_, o.ptr_), std::swap(bytes_, o.bytes_);
  }
  int device_ = 0;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory: the only memory the copy engines reach at full PCIe speed, and memory
// that is never swapped (it holds plaintext and key material while a batch is in flight).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // write_combined: for buffers the CPU only writes and the GPU only reads (uploads): the CPU's
  // stores stream out without reading lines first, and the GPU's reads skip the CPU caches.
  explicit PinnedBuffer(std::size_t bytes, bool write_combined = false) : bytes_(bytes) {
    check_cuda(cudaHostAlloc(&ptr_, bytes, cudaHostAllocPortable | (write_combined ? cudaHostAllocWriteCombined : 0)),
               "cudaHostAlloc");
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept { swap(o); }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept { swap(o); return *this; }
  ~PinnedBuffer() {
    if (ptr_) {
      secure_wipe(ptr_, bytes_);
      cudaFreeHost(ptr_);
    }
  }
  template <class T = unsigned char>
  T* get() const { return static_cast<T*>(ptr_); }
  std::size_t size() const { return bytes_; }

 private:
  void swap(PinnedBuffer& o) noexcept { std::swap(ptr_, o.ptr_), std::swap(bytes_, o.bytes_); }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  explicit Stream(int device) : device_(device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    cudaSetDevice(device_);
    cudaStreamDestroy(s_);
  }
  cudaStream_t get() const { return s_; }

 private:
  int device_;
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event(int device, unsigned flags) : device_(device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaEventCreateWithFlags(&e_, flags), "cudaEventCreate");
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    cudaSetDevice(device_);
    cudaEventDestroy(e_);
  }
  cudaEvent_t get() const { return e_; }

 private:
  int device_;
  cudaEvent_t e_ = nullptr;
};

}  // namespace gcfs::gpu
