// --engine and --gpus turned into an EngineSet: cpu, gpu or both at once (engine_factory.h).
#include "mount/engines/engine_factory.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "crypto/gcm_impl.h"
#include "crypto/hybrid_engine.h"
#include "crypto/size_routed_engine.h"
#include "cuda/gpu_engine.h"
#include "fs/engine_bench.h"

namespace gcfs {
namespace {

// Seconds for a lone batch of `bytes` in 4 KiB chunks, as new vaults have (median of `repeats`).
double lone_seconds(ChunkEngine& e, std::size_t bytes, int repeats) {
  LatencyConfig l;
  l.request_bytes = bytes;
  l.chunk_size = 4096;
  l.repeats = repeats;
  l.warmup = 5;
  return measure_latency(e, l).median_us * 1e-6;
}

// A member's starting estimate for the hybrid engine: a lone 4 KiB request's round trip (the
// overhead), and the throughput of four callers of 4 MiB (the rate under load). About 50 ms each.
EngineCost calibrate(ChunkEngine& e, const std::string& label, std::string* how) {
  const double overhead = lone_seconds(e, 4096, 30);
  ThroughputConfig t;
  t.request_bytes = 4u << 20;
  t.chunk_size = 64u << 10;
  t.concurrency = 4;
  t.min_seconds = 0.03;
  t.min_requests = 8;
  const double rate = measure_throughput(e, t).gb_per_s * 1e9;
  char line[160];
  std::snprintf(line, sizeof line, "%s %.1f us + %.1f GB/s", label.c_str(), overhead * 1e6, rate * 1e-9);
  *how += (how->empty() ? "" : ", ") + std::string(line);
  return {overhead, rate > 0 ? 1.0 / rate : 1.0};
}

// The batch size from which the GPU finishes a lone batch sooner than one cpu thread (what the
// cpu engine gives a batch under its fan-out size), by a linear model of each measured here: the
// GPU's lone 4 KiB round trip plus bytes over its rate on a lone 1 MiB batch, against bytes over
// one thread's rate on a lone 64 KiB batch. A few milliseconds.
//
// The caller keeps batches under HybridEngine::Options::inline_bytes on the cpu engine whatever
// this says, as auto does: the model compares lone batches, and with several callers at once a
// 128 KiB batch is both slower and dearer on the GPU. Measured on the H100 (2026-11-26): the
// model put the line at 77 to 144 KiB from mount to mount (one thread's rate read 2.2 to 3.7 GB/s),
// right at the 128 KiB of random reads; sent to the GPU, 8 threads of them read 4.8 to 5.0 GB/s at
// 260 daemon CPU ticks per GB, against 7.3 to 8.0 GB/s at 180 on the CPU (18 to 20 GB/s with 16
// threads, where the GPU stayed under 6). From 1 MiB the GPU costs a tenth of the CPU's.
std::size_t crossover_bytes(ChunkEngine& cpu, ChunkEngine& gpu, std::string* how) {
  constexpr std::size_t kCap = 1u << 20;
  const double gpu_4k = lone_seconds(gpu, 4096, 30), gpu_1m = lone_seconds(gpu, 1u << 20, 20),
               cpu_64k = lone_seconds(cpu, 64u << 10, 30);
  const double gpu_s_per_byte = std::max(0.0, gpu_1m - gpu_4k) / static_cast<double>((1u << 20) - 4096);
  const double cpu_s_per_byte = cpu_64k / static_cast<double>(64u << 10);
  std::size_t below = kCap;
  if (cpu_s_per_byte > gpu_s_per_byte)
    below = static_cast<std::size_t>(std::min<double>(kCap, gpu_4k / (cpu_s_per_byte - gpu_s_per_byte)));
  char line[200];
  std::snprintf(line, sizeof line, "GPU %.1f us + %.1f GB/s, one cpu thread %.1f GB/s", gpu_4k * 1e6,
                gpu_s_per_byte > 0 ? 1e-9 / gpu_s_per_byte : 0.0, 1e-9 / cpu_s_per_byte);
  *how = line;
  return below;
}

std::string describe_gpus(const GpuOptions& o) {
  std::string why, text;
  for (const auto& g : list_gpus(&why)) {
    if (!o.devices.empty() && std::find(o.devices.begin(), o.devices.end(), g.index) == o.devices.end()) continue;
    text += (text.empty() ? "" : ", ") + std::to_string(g.index) + ": " + g.name;
  }
  return text;
}

// Each GPU as a hybrid member, calibrated, its feeders bound near it.
void add_gpu_members(const std::vector<std::unique_ptr<ChunkEngine>>& gpus, const std::vector<int>& devices,
                     std::vector<HybridEngine::Member>& members, std::string* how) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string label = "gpu" + std::to_string(devices[i]);
    const int device = devices[i];
    members.push_back({gpus[i].get(), label, calibrate(*gpus[i], label, how), [device] { bind_thread_near_gpu(device); }});
  }
}

}  // namespace

// What the gpu and auto choices start from: the GPUs there are, and the cpu engine's size.
struct EngineSet::GpuChoice {
  GpuOptions options;        // o.gpu, with the engine's error log and cold-key threshold
  bool any_gpu = false;      // list_gpus found one
  std::string why;           // why it found none
  std::vector<int> devices;  // the GPUs to use: o.gpu.devices, or every one found
  std::size_t cpu_threads = 0;  // the cpu engine's
};

EngineSet::EngineSet(const EngineOptions& o) {
  if (o.name != "cpu" && o.name != "gpu" && o.name != "auto")
    throw UserError("unknown engine '" + o.name + "': choose cpu, gpu or auto");
  if (o.name == "cpu") {
    choose_cpu(o);
    return;
  }
  GpuChoice c;
  c.options = o.gpu;
  // Small batches of keys not prepared on the GPU yet run on the cpu engine (GpuOptions): a key's
  // tables cost more than the AES of a small file.
  c.options.cold_key_cpu_bytes = 256u << 10;
  const auto gpus = list_gpus(&c.why);
  c.any_gpu = !gpus.empty();
  c.devices = o.gpu.devices;
  if (c.devices.empty())
    for (const auto& g : gpus) c.devices.push_back(g.index);
  // With the hybrid engine, one core per GPU is left to the threads that feed it (see
  // crypto/hybrid_engine.h): the cpu engine's own threads would otherwise take it.
  std::size_t cpu_threads = o.cpu_threads;
  if (o.name == "auto" && c.any_gpu && cpu_threads == 0) {
    const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    cpu_threads = cores > c.devices.size() + 1 ? cores - c.devices.size() : 1;
  }
  cpu_ = std::make_unique<CpuEngine>(cpu_threads);
  c.cpu_threads = static_cast<CpuEngine&>(*cpu_).threads();
  if (o.name == "gpu") choose_gpu(o, c);
  else choose_auto(o, c);
}

void EngineSet::choose_cpu(const EngineOptions& o) {
  auto cpu = std::make_unique<CpuEngine>(o.cpu_threads);
  const std::size_t threads = cpu->threads();
  cpu_ = std::move(cpu);
  active_ = cpu_.get();
  description_ = "cpu engine (" + gcm_description() + ", " + std::to_string(threads) + " threads)";
}

// One gpu engine per GPU, so that each has its own measured rate, feeder threads and share of the
// work, and a GPU that fails is retired alone. Throws with the GPU problem named.
void EngineSet::make_engine_per_gpu(const GpuChoice& c) {
  for (int d : c.devices) {
    GpuOptions one = c.options;
    one.devices = {d};
    gpus_.push_back(make_gpu_engine(one, *cpu_));
  }
}

// `--engine gpu` as one gpu engine per GPU behind the hybrid engine: the GPUs take every batch,
// the cpu engine (member 0, given nothing while a GPU is left: no inline slot, no small-batch
// shortcut) only those of GPUs that fail. whole_batches: each batch whole to one GPU, chosen by
// the model; otherwise taken from the hybrid engine's queue by the GPUs' feeder threads. Returns
// what the calibration measured; throws with the GPU problem named.
std::string EngineSet::put_gpus_behind_hybrid(const GpuChoice& c, bool whole_batches) {
  HybridEngine::Options ho;
  if (whole_batches) {
    ho.name = "gpu";
    ho.route_whole_max_bytes = SIZE_MAX;
    // The rates stay as calibrated at start; the bytes at work on each GPU do the balancing, which
    // was measured at least as fast as one engine over every GPU on each shape. Learning from
    // finished calls, as the hybrid did then (an arithmetic mean, since made robust), took a
    // caller's wait for the CPU (32 callers on 32 cores) for the GPU's speed: with 128 KiB calls
    // one GPU's rate fell to 0.1 GB/s and the other GPU got nearly every call (two H100s,
    // 2026-11-26: 8 and 16 callers x 128 KiB at 11 GB/s, one GPU's rate).
    ho.learn = false;
  }
  make_engine_per_gpu(c);
  std::string how;
  std::vector<HybridEngine::Member> members;
  members.push_back({cpu_.get(), "cpu", {2e-6, 1e-9}});
  add_gpu_members(gpus_, c.devices, members, &how);
  ho.buffer_member = 1;
  ho.inline_slots = 0;
  ho.inline_bytes = 0;
  hybrid_ = std::make_unique<HybridEngine>(std::move(members), ho);
  active_ = hybrid_.get();
  return how;
}

void EngineSet::choose_gpu(const EngineOptions& o, const GpuChoice& c) {
  if (o.gpu_feeders) {
    // The trial variant: every batch taken from the hybrid engine's queue by the GPUs' feeder
    // threads (none runs in the caller).
    const std::string how = put_gpus_behind_hybrid(c, false);
    description_ = "gpu engine (" + describe_gpus(o.gpu) + ") fed from one queue by threads per GPU (measured at start: " +
                   how + "), cpu engine as fallback";
    return;
  }
  if (c.devices.size() > 1 && o.gpu_engine_per_gpu) {
    // Several GPUs: one engine each, every batch whole to one of them, chosen by the model.
    const std::string how = put_gpus_behind_hybrid(c, true);
    description_ = "gpu engine (" + describe_gpus(o.gpu) + "), one per GPU, each batch whole to the GPU that " +
                   "finishes it first by its rate measured at start (" + how + ") and the bytes at work there, " +
                   "cpu engine as fallback";
  } else {
    gpus_.push_back(make_gpu_engine(c.options, *cpu_));  // throws with the GPU problem named
    active_ = gpus_.back().get();
    description_ = "gpu engine (" + describe_gpus(o.gpu) + "), cpu engine as fallback";
  }
  if (o.small_batches_on_cpu) choose_gpu_small_batches_on_cpu();
}

// Batches under the crossover measured at start go to the cpu engine, in front of the GPUs.
void EngineSet::choose_gpu_small_batches_on_cpu() {
  std::string how;
  const std::size_t crossover = crossover_bytes(*cpu_, *gpus_.front(), &how);
  const std::size_t small = HybridEngine::Options{}.inline_bytes;  // what auto keeps on the CPU too
  const std::size_t below = std::max(crossover, small);
  router_ = std::make_unique<SizeRoutedEngine>(*cpu_, *active_, below);
  active_ = router_.get();
  description_ += "; batches under " + std::to_string(below >> 10) + " KiB on the cpu engine (one thread " +
                  "finishes a lone batch sooner than the GPU's round trip under " + std::to_string(crossover >> 10) +
                  " KiB, measured at start: " + how + "; under " + std::to_string(small >> 10) +
                  " KiB, several at once cost the GPU more CPU per GB than the cpu engine)";
}

void EngineSet::choose_auto(const EngineOptions& o, const GpuChoice& c) {
  if (!c.any_gpu) {
    active_ = cpu_.get();
    description_ = "auto: no usable GPU (" + c.why + "), using the cpu engine (" + std::to_string(c.cpu_threads) +
                   " threads)";
    return;
  }
  try {
    make_engine_per_gpu(c);
  } catch (const UserError& e) {
    gpus_.clear();
    active_ = cpu_.get();
    description_ = std::string("auto: the GPU cannot be used (") + e.what() + "), using the cpu engine";
    return;
  }
  std::string how;
  std::vector<HybridEngine::Member> members;
  members.push_back({cpu_.get(), "cpu", calibrate(*cpu_, "cpu", &how)});
  add_gpu_members(gpus_, c.devices, members, &how);
  HybridEngine::Options ho;
  ho.buffer_member = 1;  // the first GPU's page-locked memory: the GPUs then skip their staging copies
  // Batches under 256 KiB (HybridEngine::Options::inline_bytes) run on the cpu engine in the
  // caller's thread; everything larger is shared by the model, a lone stream's requests too.
  // Measured on the H100 machine through the mount (two interleaved rounds, 2026-11-26), against
  // lone requests of up to 4 MiB kept on the CPU: streams 1.05x to 1.19x faster (the GPU's share
  // frees the cores the FUSE path needs), and 1.13x to 1.25x the cpu engine's speed. Not the
  // crossover `--engine gpu` measures (one lone batch's latency, 69 to 129 KiB on the H200
  // machines): under load the cpu engine's cores seal 128 KiB batches 4 to 7 times faster than
  // a GPU (32 callers: 83 GB/s against 12), and sharing them halved auto's rate there.
  ho.lone_inline_bytes = 0;
  // Up to the largest FUSE request (4 MiB), a batch goes whole to the member that finishes it first
  // by the model, the GPU called in the request's own thread: 8 streams reading through the mount
  // on the H100 machine did 6.5 GB/s at 1.05 daemon CPU s/GB with every request split between
  // the cores and the GPU's feeder threads, and 8.1 GB/s at 0.67 with `--engine gpu` (whole
  // requests, no hand-off). Larger batches (the engine's own callers) are still shared.
  ho.route_whole_max_bytes = 4u << 20;
  hybrid_ = std::make_unique<HybridEngine>(std::move(members), ho);
  active_ = hybrid_.get();
  description_ = "auto: the cpu engine (" + std::to_string(c.cpu_threads) + " threads) and " +
                 (gpus_.size() == 1 ? std::string("the gpu engine") : std::to_string(gpus_.size()) + " gpu engines") +
                 " (" + describe_gpus(o.gpu) + ") at once; batches under " + std::to_string(ho.inline_bytes >> 10) +
                 " KiB on the cpu engine, up to " + std::to_string(ho.route_whole_max_bytes >> 20) +
                 " MiB whole on the member that finishes them first, larger ones shared, by measured cost (measured at "
                 "start: " + how + ")";
}


EngineSet::~EngineSet() = default;

std::string EngineSet::usage() const {
  return hybrid_ ? hybrid_->describe() : std::string();
}

}  // namespace gcfs
