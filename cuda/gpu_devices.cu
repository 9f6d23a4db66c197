// The gpu engine's entry points (gpu_engine.h): the GPUs this process can use, where they sit,
// and the engine made over them. The engine itself is gpu_engine.cu and gpu_batch_launch.cu.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "crypto/errors.h"
#include "cuda/driver_probe.h"
#include "cuda/gpu_engine.h"
#include "cuda/gpu_engine_impl.h"
#include "cuda/host_numa.h"

namespace gcfs {

bool gpu_support_compiled() { return true; }

GpuLaunchCounters gpu_launch_counters() {
  return {gpu::g_launches.load(std::memory_order_relaxed), gpu::g_pieces.load(std::memory_order_relaxed),
          gpu::g_requests.load(std::memory_order_relaxed)};
}

int gpu_numa_node(int device) {
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return numa::node_of_pci_device(bus_id);
}

bool bind_thread_near_gpu(int device) {
  if (numa::online_nodes() < 2) return false;
  return numa::bind_thread_to_cpus(numa::cpus_of_node(gpu_numa_node(device)));
}

std::vector<GpuInfo> list_gpus(std::string* why_none) {
  std::vector<GpuInfo> out;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why_none) {
      // The runtime says "insufficient driver" both when there is no driver at all and when it
      // is too old: the driver probe tells the two apart.
      const std::string driver = describe_driver_problem(probe_nvidia_driver(), CUDART_VERSION);
      if (e == cudaErrorNoDevice) *why_none = "no NVIDIA GPU found (the NVIDIA driver is installed but sees none)";
      else if (!driver.empty()) *why_none = driver;
      else if (e == cudaErrorInsufficientDriver)
        *why_none = "the NVIDIA driver is too old for this build (CUDA " + cuda_version_text(CUDART_VERSION) + ")";
      else *why_none = std::string("the CUDA driver cannot be used (") + cudaGetErrorString(e) + ")";
    }
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.sm_count = p.multiProcessorCount;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.memory_bytes = p.totalGlobalMem;
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i) == cudaSuccess) g.pci_bus_id = bus_id;
    g.numa_node = numa::node_of_pci_device(g.pci_bus_id);
    out.push_back(g);
  }
  if (out.empty() && why_none) *why_none = "no NVIDIA GPU found (the NVIDIA driver is installed but sees none)";
  return out;
}

std::unique_ptr<ChunkEngine> make_gpu_engine(const GpuOptions& options, ChunkEngine& fallback) {
  std::string why;
  const auto gpus = list_gpus(&why);
  if (gpus.empty()) throw UserError("the gpu engine cannot run: " + why);
  std::vector<int> devices = options.devices;
  if (devices.empty())
    for (const auto& g : gpus) devices.push_back(g.index);
  for (int d : devices)
    if (d < 0 || d >= static_cast<int>(gpus.size()))
      throw UserError("GPU " + std::to_string(d) + " does not exist (this machine has " + std::to_string(gpus.size()) +
                      " visible GPU(s))");
  GpuOptions o = options;
  // For comparisons on one machine without a rebuild: GPUCRYPTFS_GPU_RESIDENT=0 turns the resident
  // worker off (GpuOptions::resident), =1 on.
  if (const char* r = std::getenv("GPUCRYPTFS_GPU_RESIDENT"); r && (r[0] == '0' || r[0] == '1')) o.resident = r[0] == '1';
  // GPUCRYPTFS_RESIDENT_PARTS=N: at most N CTAs per chunk (GpuOptions::resident_max_parts; 1 never splits).
  if (const char* p = std::getenv("GPUCRYPTFS_RESIDENT_PARTS"); p && std::atoi(p) > 0) o.resident_max_parts = std::atoi(p);
  try {
    return std::make_unique<gpu::GpuEngine>(o, fallback, devices);
  } catch (const gpu::CudaError& e) {
    throw UserError(std::string("the gpu engine cannot start: ") + e.what());
  }
}

}  // namespace gcfs
