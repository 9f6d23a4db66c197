// What `gpucryptfs bench` measures: the grid of engines, chunk sizes, request sizes and
// concurrency, decided before anything runs so the progress bar knows the total.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gcfs::cli {

enum class BenchTarget {
  CpuOneThread,   // the cpu engine with one thread: one core's AES-NI
  CpuAllThreads,  // the cpu engine with a thread per core
  GpuEngine,      // the gpu engine through ChunkEngine: host -> GPU -> host, everything included
  GpuKernel,      // the kernels alone, data resident on the GPU (one point: every variant)
};
const char* to_string(BenchTarget t);

struct BenchPoint {
  BenchTarget target = BenchTarget::CpuOneThread;
  std::string op = "seal";  // seal | open (kernel points measure ctr and seal)
  std::size_t chunk_size = 0;
  std::size_t request_bytes = 0;
  int concurrency = 1;
};

struct BenchSweep {
  std::vector<std::size_t> chunk_sizes;
  std::vector<std::size_t> request_sizes;
  std::vector<int> concurrency;  // for cpu-all and gpu; cpu-1t always runs 1
  std::vector<std::string> ops;
  double min_seconds = 0.3;      // per point, handed to engine_bench
  std::size_t min_requests = 4;
  bool latency = true;           // median single-request latency for requests up to 4 MiB
};

// quick: a coarse grid that ends within a minute on a laptop; otherwise the full grid
// (4 KiB..1 MiB chunks including the 35-150 KB range, 4 KiB..256 MiB requests).
BenchSweep default_sweep(bool quick);

// The points for the engines asked for. Requests smaller than a chunk are measured only with
// the smallest chunk size: one partial chunk costs the same whatever the chunk size is. Requests
// over 16 MiB are measured at 64 KiB and 1 MiB chunks only, and several callers only while they
// hold 128 MiB or less together.
std::vector<BenchPoint> plan_points(const BenchSweep& sweep, bool cpu, bool gpu_engine, bool gpu_kernels);

}  // namespace gcfs::cli
