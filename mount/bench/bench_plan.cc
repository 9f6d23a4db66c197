// The bench verb's grid (bench_plan.h): which engines, chunk sizes and request sizes it measures.
#include "mount/bench/bench_plan.h"

#include <algorithm>

namespace gcfs::cli {
namespace {
// Each concurrent caller holds its own input and output buffers: bound what one point allocates.
constexpr std::size_t kMaxConcurrentBytes = std::size_t{128} << 20;
// Requests beyond 16 MiB are slow to set up and add nothing per chunk size: the curves are flat
// there. They are measured at the default chunk size and at 1 MiB only.
constexpr std::size_t kBigRequest = std::size_t{16} << 20;
bool big_requests_measured_at(std::size_t chunk) { return chunk == 64 * 1024 || chunk == 1024 * 1024; }
}  // namespace

const char* to_string(BenchTarget t) {
  switch (t) {
    case BenchTarget::CpuOneThread: return "cpu-1t";
    case BenchTarget::CpuAllThreads: return "cpu-all";
    case BenchTarget::GpuEngine: return "gpu";
    case BenchTarget::GpuKernel: return "gpu-kernel";
  }
  return "?";
}

BenchSweep default_sweep(bool quick) {
  constexpr std::size_t K = 1024, M = 1024 * 1024;
  BenchSweep s;
  if (quick) {
    s.chunk_sizes = {4 * K, 64 * K, 1 * M};
    s.request_sizes = {4 * K, 64 * K, 1 * M, 16 * M, 64 * M};
    s.concurrency = {1};
    s.ops = {"seal"};
    s.min_seconds = 0.05;
    s.min_requests = 2;
    return s;
  }
  // 36, 100 and 148 KiB: the 35-150 KB range in which earlier GPU AES work placed the
  // crossover and typical disk-volume chunk sizes. Chunks need not be powers of two here: the
  // engines take any length; only the on-disk format insists on powers of two.
  s.chunk_sizes = {4 * K, 16 * K, 36 * K, 64 * K, 100 * K, 148 * K, 256 * K, 1 * M};
  s.request_sizes = {4 * K, 16 * K, 64 * K, 256 * K, 1 * M, 4 * M, 16 * M, 64 * M, 256 * M};
  s.concurrency = {1, 8};
  s.ops = {"seal"};
  s.min_seconds = 0.2;
  s.min_requests = 3;
  return s;
}

std::vector<BenchPoint> plan_points(const BenchSweep& s, bool cpu, bool gpu_engine, bool gpu_kernels) {
  std::vector<BenchPoint> points;
  const std::size_t smallest_chunk = *std::min_element(s.chunk_sizes.begin(), s.chunk_sizes.end());
  for (std::size_t chunk : s.chunk_sizes) {
    for (std::size_t request : s.request_sizes) {
      if (request < chunk && chunk != smallest_chunk) continue;
      if (request > kBigRequest && !big_requests_measured_at(chunk)) continue;
      for (const auto& op : s.ops) {
        if (cpu) points.push_back({BenchTarget::CpuOneThread, op, chunk, request, 1});
        for (int c : s.concurrency) {
          if (c > 1 && request * static_cast<std::size_t>(c) > kMaxConcurrentBytes) continue;
          if (cpu) points.push_back({BenchTarget::CpuAllThreads, op, chunk, request, c});
          if (gpu_engine) points.push_back({BenchTarget::GpuEngine, op, chunk, request, c});
        }
      }
      if (gpu_kernels) points.push_back({BenchTarget::GpuKernel, "seal", chunk, request, 1});
    }
  }
  return points;
}

}  // namespace gcfs::cli
