#include "mount/engine_factory.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "fs/engine_bench.h"
#include "fs/log.h"

namespace gcfs {
namespace {

// Sends each batch where it runs fastest: small batches pay more in PCIe latency and launch cost
// than the GPU saves them.
class HybridEngine final : public ChunkEngine {
 public:
  HybridEngine(ChunkEngine& cpu, ChunkEngine& gpu, std::size_t crossover)
      : cpu_(cpu), gpu_(gpu), crossover_(crossover) {}
  std::string name() const override { return "auto"; }
  void seal(std::span<ChunkOp> ops) override { pick(ops).seal(ops); }
  void open(std::span<ChunkOp> ops) override { pick(ops).open(ops); }
  // The gpu engine's kind: its pinned memory serves the cpu engine as well as any other.
  HostBuffer allocate_io_buffer(std::size_t bytes) override { return gpu_.allocate_io_buffer(bytes); }

 private:
  ChunkEngine& pick(std::span<ChunkOp> ops) {
    std::size_t bytes = 0;
    for (const auto& op : ops) bytes += op.len;
    return bytes >= crossover_ ? gpu_ : cpu_;
  }
  ChunkEngine& cpu_;
  ChunkEngine& gpu_;
  std::size_t crossover_;
};

std::string size_text(std::size_t b) {
  return b >= (1u << 20) ? std::to_string(b >> 20) + " MiB" : std::to_string(b >> 10) + " KiB";
}

// The smallest request size at which one request's round trip is shorter on the GPU, from a few
// requests of each size on both engines; what it measured goes into *how.
std::size_t measure_crossover(ChunkEngine& cpu, ChunkEngine& gpu, std::string* how) {
  for (std::size_t size : {std::size_t{16} << 10, std::size_t{64} << 10, std::size_t{256} << 10,
                           std::size_t{1} << 20, std::size_t{4} << 20}) {
    LatencyConfig c;
    c.request_bytes = size;
    c.chunk_size = std::min<std::size_t>(size, 64 << 10);
    c.repeats = 15;
    c.warmup = 3;
    const double cpu_us = measure_latency(cpu, c).median_us;
    const double gpu_us = measure_latency(gpu, c).median_us;
    char line[160];
    std::snprintf(line, sizeof line, "%s: cpu %.0f us, gpu %.0f us", size_text(size).c_str(), cpu_us, gpu_us);
    *how += (how->empty() ? "" : "; ") + std::string(line);
    if (gpu_us < cpu_us) return size;
  }
  return std::numeric_limits<std::size_t>::max();
}

std::string describe_gpus(const GpuOptions& o) {
  std::string why, text;
  for (const auto& g : list_gpus(&why)) {
    if (!o.devices.empty() && std::find(o.devices.begin(), o.devices.end(), g.index) == o.devices.end()) continue;
    text += (text.empty() ? "" : ", ") + std::to_string(g.index) + ": " + g.name;
  }
  return text;
}

}  // namespace

EngineSet::EngineSet(const EngineOptions& o) {
  if (o.name != "cpu" && o.name != "gpu" && o.name != "auto")
    throw UserError("unknown engine '" + o.name + "': choose cpu, gpu or auto");
  auto cpu = std::make_unique<CpuEngine>(o.cpu_threads);
  const std::size_t threads = cpu->threads();
  cpu_ = std::move(cpu);
  if (o.name == "cpu") {
    active_ = cpu_.get();
    description_ = "cpu engine (OpenSSL, " + std::to_string(threads) + " threads)";
    return;
  }
  GpuOptions gpu_options = o.gpu;
  if (!gpu_options.on_error) gpu_options.on_error = [](const std::string& m) { log::error(m); };
  if (o.name == "gpu") {
    gpu_ = make_gpu_engine(gpu_options, *cpu_);  // throws with the GPU problem named
    active_ = gpu_.get();
    description_ = "gpu engine (" + describe_gpus(o.gpu) + "), cpu engine as fallback";
    return;
  }
  std::string why;
  if (list_gpus(&why).empty()) {
    active_ = cpu_.get();
    description_ = "auto: no usable GPU (" + why + "), using the cpu engine (" + std::to_string(threads) + " threads)";
    return;
  }
  try {
    gpu_ = make_gpu_engine(gpu_options, *cpu_);
  } catch (const UserError& e) {
    active_ = cpu_.get();
    description_ = std::string("auto: the GPU cannot be used (") + e.what() + "), using the cpu engine";
    return;
  }
  std::size_t crossover = o.auto_crossover_bytes;
  std::string source = "given";
  if (crossover == 0) {
    std::string how;
    crossover = measure_crossover(*cpu_, *gpu_, &how);
    source = "measured at start: " + how;
  }
  hybrid_ = std::make_unique<HybridEngine>(*cpu_, *gpu_, crossover);
  active_ = hybrid_.get();
  if (crossover == std::numeric_limits<std::size_t>::max())
    description_ = "auto: the cpu engine was faster at every size tried, so it takes every batch (" + source + ")";
  else
    description_ = "auto: gpu engine for batches of " + size_text(crossover) + " and more, cpu engine below (" + source + ")";
}

EngineSet::~EngineSet() = default;

}  // namespace gcfs
