// Built instead of the CUDA sources when nvcc is absent: the gpu engine exists as a name that
// explains why it cannot run.
#include "crypto/errors.h"
#include "cuda/driver_probe.h"
#include "cuda/gpu_engine.h"

namespace gcfs {

bool gpu_support_compiled() { return false; }

GpuLaunchCounters gpu_launch_counters() { return {}; }
int gpu_numa_node(int) { return -1; }
bool bind_thread_near_gpu(int) { return false; }

std::vector<GpuInfo> list_gpus(std::string* why_none) {
  if (why_none) {
    // What a CUDA build would find here, so the user knows whether rebuilding would help.
    const DriverState d = probe_nvidia_driver();
    const std::string hw = d.library_found ? "an NVIDIA driver is installed" : "no NVIDIA GPU/driver found either";
    *why_none = "this gpucryptfs was built without CUDA (nvcc was not found at build time); " + hw;
  }
  return {};
}

std::unique_ptr<ChunkEngine> make_gpu_engine(const GpuOptions&, ChunkEngine&) {
  throw UserError("the gpu engine is not available: this gpucryptfs was built without CUDA (nvcc was not found at build time)");
}

std::vector<std::string> gpu_kernel_variants() { return {}; }

std::vector<std::pair<std::string, double>> gpu_transfer_probe(int) {
  throw UserError("no GPU transfers to probe: this gpucryptfs was built without CUDA");
}

std::vector<std::pair<std::string, double>> gpu_transfer_probe_all(const std::vector<int>&) {
  throw UserError("no GPU transfers to probe: this gpucryptfs was built without CUDA");
}

GpuKernelTiming gpu_kernel_benchmark(const std::string&, const std::string&, std::size_t, std::size_t, int) {
  throw UserError("no GPU kernels: this gpucryptfs was built without CUDA");
}

}  // namespace gcfs
