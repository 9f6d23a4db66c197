// Kernel-only rows for `gpucryptfs bench`: the gpu engine's kernels on device-resident data. Here in
// mount/, beside the engine factory, so that fs/ sees only the engine interface.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gcfs {

// Kernel-only numbers of the gpu engine (data resident on the device, CUDA events), one row per
// variant and kind ("ctr", "seal"). Empty with *why_not set when there is no GPU or no CUDA build.
struct KernelBenchResult {
  std::string variant;            // "coarse", "fine", ...
  std::string what;               // "ctr" or "seal"
  std::size_t chunk_size = 0;
  std::size_t bytes = 0;
  double seconds = 0;             // median of several passes
  double gb_per_s = 0;
};

std::vector<KernelBenchResult> measure_gpu_kernels(std::size_t chunk_size, std::size_t total_bytes,
                                                   std::string* why_not = nullptr, int device = 0);

}  // namespace gcfs
