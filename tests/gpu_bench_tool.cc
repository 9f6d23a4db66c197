// gpu_engine_bench: the issue-3 benchmark set in one run, side by side. Kernel-only throughput
// per variant, host->GPU->host throughput through the engine (streams pipeline), single-request
// latency, the cpu engine with one and all threads, and CPU seconds per GB for each. Prints CSV
// rows as it goes and a short table last. Built on fs/engine_bench (no CUDA headers here).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/hybrid_engine.h"
#include "cuda/gpu_engine.h"
#include "fs/engine_bench.h"
#include "mount/engine_factory.h"

using namespace gcfs;

namespace {

struct Row {
  std::string what, engine, detail;
  double value;
  std::string unit;
  double cpu_s_per_gb;
};

std::vector<Row> g_rows;

void emit(const Row& r) {
  g_rows.push_back(r);
  std::printf("csv,%s,%s,%s,%.3f,%s,%.4f\n", r.what.c_str(), r.engine.c_str(), r.detail.c_str(), r.value, r.unit.c_str(),
              r.cpu_s_per_gb);
  std::fflush(stdout);
}

std::string kib(std::size_t b) {
  return b >= (1u << 20) ? std::to_string(b >> 20) + "MiB" : std::to_string(b >> 10) + "KiB";
}

void throughput(ChunkEngine& e, const std::string& label, std::size_t chunk, std::size_t request, int conc,
                BenchOp op, double secs, bool engine_buffers = true) {
  ThroughputConfig c;
  c.engine_buffers = engine_buffers;
  c.op = op;
  c.chunk_size = chunk;
  c.request_bytes = request;
  c.concurrency = conc;
  c.min_seconds = secs;
  const auto r = measure_throughput(e, c);
  emit({std::string("throughput_") + to_string(op), label,
        "chunk=" + kib(chunk) + " req=" + kib(request) + " threads=" + std::to_string(conc), r.gb_per_s, "GB/s",
        r.cpu_seconds_per_gb});
}

void latency(ChunkEngine& e, const std::string& label, std::size_t request, std::size_t chunk,
             bool engine_buffers = true) {
  LatencyConfig c;
  c.engine_buffers = engine_buffers;
  c.request_bytes = request;
  c.chunk_size = std::min(chunk, request);
  c.repeats = request >= (16u << 20) ? 30 : 300;
  c.warmup = request >= (16u << 20) ? 3 : 30;
  const auto r = measure_latency(e, c);
  emit({"latency_seal", label, "req=" + kib(request) + " chunk=" + kib(c.chunk_size), r.median_us, "us median", 0});
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const double secs = quick ? 0.3 : 1.0;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("csv,what,engine,detail,value,unit,cpu_s_per_gb\n");

  std::string why;
  const auto gpus = list_gpus(&why);
  for (const auto& g : gpus)
    std::printf("gpu %d: %s, %d SMs, cc %d.%d, %.1f GiB\n", g.index, g.name.c_str(), g.sm_count, g.cc_major, g.cc_minor,
                static_cast<double>(g.memory_bytes) / (1u << 30));
  if (gpus.empty()) std::printf("no GPU: %s\n", why.c_str());

  // 0. The floors: launch and copy latency, PCIe bandwidth, one core's memcpy.
  if (!gpus.empty())
    for (const auto& [name, value] : gpu_transfer_probe()) emit({"probe", "gpu", name, value, "", 0});

  // 1. Kernel-only, device-resident data.
  if (!gpus.empty()) {
    for (std::size_t chunk : {std::size_t{4096}, std::size_t{65536}, std::size_t{1} << 20}) {
      for (const auto& v : gpu_kernel_variants()) {
        for (const char* what : {"ctr", "seal", "open"}) {
          const auto t = gpu_kernel_benchmark(v, what, chunk, std::size_t{256} << 20);
          emit({std::string("kernel_") + what, "gpu/" + v, "chunk=" + kib(chunk) + " 256MiB resident",
                static_cast<double>(t.bytes) / t.seconds / 1e9, "GB/s", 0});
        }
      }
    }
  }

  // 1b. Kernel-only time of small batches: the GPU's share of one request's round trip.
  if (!gpus.empty()) {
    const std::pair<std::size_t, std::size_t> small[] = {{4096, 4096}, {65536, 65536}, {65536, 131072}, {65536, 1u << 20}};
    for (const auto& [chunk_size, total] : small)
      for (const auto& v : gpu_kernel_variants())
        for (const char* what : {"ctr", "seal"}) {
          const auto t = gpu_kernel_benchmark(v, what, chunk_size, total);
          emit({std::string("kernel_time_") + what, "gpu/" + v, "chunk=" + kib(chunk_size) + " batch=" + kib(total),
                t.seconds * 1e6, "us", 0});
        }
  }

  CpuEngine cpu1(1), cpu_all(0);
  // Unless a label says "staged", request buffers come from the engine (pinned: zero-copy), as the
  // filesystem's do; "gpu/staged" is plain memory copied through the staging buffers (the earlier
  // path), "gpu/unfused" the separate CTR and GHASH launches for small batches, "gpu/copied" one
  // fused launch with the data moved by copy calls instead of by the kernel itself (direct off).
  std::unique_ptr<ChunkEngine> gpu, gpu_coarse, gpu_nospin, gpu_unfused, gpu_copied;
  CpuEngine fallback(0);
  if (!gpus.empty()) {
    GpuOptions o;
    gpu = make_gpu_engine(o, fallback);
    o.kernel = "coarse";
    gpu_coarse = make_gpu_engine(o, fallback);
    o.kernel = "auto";
    o.spin = std::chrono::microseconds(0);  // sleep on the GPU's signal at once: least CPU, more latency
    gpu_nospin = make_gpu_engine(o, fallback);
    GpuOptions u;
    u.fused = false;
    gpu_unfused = make_gpu_engine(u, fallback);
    GpuOptions c;
    c.direct = false;  // fused, with the data copied by copy calls instead of moved by the kernel
    gpu_copied = make_gpu_engine(c, fallback);
    for (ChunkEngine* e : {gpu.get(), gpu_coarse.get(), gpu_nospin.get(), gpu_unfused.get(), gpu_copied.get()})
      verify_engine_against_cpu(*e, 65536);
    std::printf("gpu engines verified against the cpu engine\n");
  }

  // 2. Throughput through the engines (host memory in and out), CPU s/GB alongside.
  const std::size_t chunk = 65536;
  for (BenchOp op : {BenchOp::Seal, BenchOp::Open}) {
    throughput(cpu1, "cpu/1thread", chunk, 1u << 20, 1, op, secs);
    throughput(cpu_all, "cpu/" + std::to_string(cores) + "threads", chunk, 16u << 20, 1, op, secs);
    throughput(cpu_all, "cpu/" + std::to_string(cores) + "threads", chunk, 1u << 20, static_cast<int>(cores), op, secs);
    if (gpu) {
      throughput(*gpu, "gpu", chunk, 16u << 20, 1, op, secs);
      throughput(*gpu, "gpu", chunk, 16u << 20, 4, op, secs);
      throughput(*gpu, "gpu/staged", chunk, 16u << 20, 4, op, secs, false);
      throughput(*gpu, "gpu", chunk, 16u << 20, 8, op, secs);
      throughput(*gpu, "gpu", chunk, 1u << 20, 16, op, secs);
      throughput(*gpu, "gpu", chunk, 128u << 10, 32, op, secs);
      throughput(*gpu_nospin, "gpu/nospin", chunk, 16u << 20, 4, op, secs);
      throughput(*gpu_nospin, "gpu/nospin", chunk, 1u << 20, 16, op, secs);
    }
  }
  if (gpu) throughput(*gpu, "gpu", 4096, 1u << 20, 16, BenchOp::Seal, secs);

  // 3. Round-trip latency of one request.
  for (std::size_t req : {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{128} << 10, std::size_t{1} << 20,
                          std::size_t{16} << 20}) {
    latency(cpu1, "cpu/1thread", req, chunk);
    latency(cpu_all, "cpu/" + std::to_string(cores) + "threads", req, chunk);
    if (gpu) latency(*gpu, "gpu", req, chunk);
    if (gpu && req <= (1u << 20)) latency(*gpu, "gpu/staged", req, chunk, false);
    if (gpu && req <= (1u << 20)) latency(*gpu_unfused, "gpu/unfused", req, chunk);
    if (gpu && req <= (1u << 20)) latency(*gpu_copied, "gpu/copied", req, chunk);
    if (gpu && req <= (1u << 20)) latency(*gpu_coarse, "gpu/coarse", req, chunk);
    if (gpu && req <= (1u << 20)) latency(*gpu_nospin, "gpu/nospin", req, chunk);
  }

  // 4. --engine auto (the hybrid engine: the cpu engine and the GPUs at once, as the mount builds
  // it, calibration included) beside the cpu engine and the gpu engine alone, same shapes.
  if (gpu) {
    EngineOptions ao;
    ao.name = "auto";
    EngineSet set(ao);
    std::printf("%s\n", set.description().c_str());
    verify_engine_against_cpu(set.engine(), 65536);
    struct Shape {
      std::size_t chunk, request;
      int callers;
    };
    for (const Shape& sh : {Shape{65536, 128u << 10, 32}, Shape{65536, 1u << 20, 16}, Shape{65536, 16u << 20, 4},
                            Shape{4096, 1u << 20, 16}}) {
      for (BenchOp op : {BenchOp::Seal, BenchOp::Open}) {
        throughput(cpu_all, "mix/cpu", sh.chunk, sh.request, sh.callers, op, secs);
        throughput(*gpu, "mix/gpu", sh.chunk, sh.request, sh.callers, op, secs);
        throughput(set.engine(), "mix/auto", sh.chunk, sh.request, sh.callers, op, secs);
      }
    }
    if (auto* h = dynamic_cast<HybridEngine*>(&set.engine())) std::printf("auto after the runs: %s\n", h->describe().c_str());
  }

  // 5. A fresh gpu engine's round trip after all of the above, beside the long-lived one's: whether
  // the earlier runs left the process or the GPU slower for lone requests.
  if (gpu) {
    auto fresh = make_gpu_engine(GpuOptions{}, fallback);
    for (std::size_t req : {std::size_t{4} << 10, std::size_t{128} << 10}) {
      latency(*gpu, "gpu/after", req, chunk);
      latency(*fresh, "gpu/fresh", req, chunk);
    }
  }

  std::printf("\n%-16s %-16s %-40s %12s %-10s %10s\n", "what", "engine", "detail", "value", "unit", "cpu s/GB");
  for (const auto& r : g_rows)
    std::printf("%-16s %-16s %-40s %12.2f %-10s %10.4f\n", r.what.c_str(), r.engine.c_str(), r.detail.c_str(), r.value,
                r.unit.c_str(), r.cpu_s_per_gb);
  return 0;
}
