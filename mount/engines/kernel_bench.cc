// The gpu engine's kernel rows for gpucryptfs bench (kernel_bench.h).
#include "mount/engines/kernel_bench.h"

#include "cuda/gpu_engine.h"

namespace gcfs {

std::vector<KernelBenchResult> measure_gpu_kernels(std::size_t chunk_size, std::size_t total_bytes,
                                                   std::string* why_not, int device) {
  std::vector<KernelBenchResult> rows;
  std::string why;
  if (list_gpus(&why).empty()) {
    if (why_not) *why_not = why;
    return rows;
  }
  for (const auto& variant : gpu_kernel_variants()) {
    for (const char* what : {"ctr", "seal"}) {
      const auto t = gpu_kernel_benchmark(variant, what, chunk_size, total_bytes, device);
      KernelBenchResult r;
      r.variant = variant;
      r.what = what;
      r.chunk_size = chunk_size;
      r.bytes = t.bytes;
      r.seconds = t.seconds;
      r.gb_per_s = t.seconds > 0 ? static_cast<double>(t.bytes) / t.seconds / 1e9 : 0;
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace gcfs
