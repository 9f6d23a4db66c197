// gpu_engine_bench: the issue-3 benchmark set in one run, side by side. Kernel-only throughput
// per variant, host->GPU->host throughput through the engine (streams pipeline), single-request
// latency, the cpu engine with one and all threads, and CPU seconds per GB for each. Prints CSV
// rows as it goes and a short table last. Built on fs/engine_bench (no CUDA headers here).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/hybrid_engine.h"
#include "cuda/gpu_engine.h"
#include "fs/engine_bench.h"
#include "mount/engines/engine_factory.h"

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
  const GpuLaunchCounters before = gpu_launch_counters();
  const auto r = measure_throughput(e, c);
  const GpuLaunchCounters after = gpu_launch_counters();
  const std::string detail = "chunk=" + kib(chunk) + " req=" + kib(request) + " threads=" + std::to_string(conc);
  // How well the gpu engine batched: calls that reached its queue, and the pieces they were cut
  // into, per launch (on a line of its own: the CSV rows pair engines by their detail).
  if (after.launches > before.launches) {
    const auto launches = static_cast<double>(after.launches - before.launches);
    std::printf("batching %s %s %s: %.1f requests and %.1f pieces per launch\n", to_string(op), label.c_str(),
                detail.c_str(), static_cast<double>(after.requests - before.requests) / launches,
                static_cast<double>(after.pieces - before.pieces) / launches);
  }
  emit({std::string("throughput_") + to_string(op), label, detail, r.gb_per_s, "GB/s", r.cpu_seconds_per_gb});
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

void print_table() {
  std::printf("\n%-16s %-16s %-40s %12s %-10s %10s\n", "what", "engine", "detail", "value", "unit", "cpu s/GB");
  for (const auto& r : g_rows)
    std::printf("%-16s %-16s %-40s %12.2f %-10s %10.4f\n", r.what.c_str(), r.engine.c_str(), r.detail.c_str(), r.value,
                r.unit.c_str(), r.cpu_s_per_gb);
}

std::vector<int> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// Each caller thread keeps to one member, the threads dealt out in turn: several per-GPU engines in
// one process with no routing between them (gpusplit), what two processes that share nothing do
// apart from the process itself (the driver's state, the pinned-buffer registry).
class ThreadSplitEngine final : public ChunkEngine {
 public:
  explicit ThreadSplitEngine(std::vector<ChunkEngine*> members) : members_(std::move(members)) {}
  std::string name() const override { return "gpusplit"; }
  void seal(std::span<ChunkOp> ops) override { mine().seal(ops); }
  void open(std::span<ChunkOp> ops) override { mine().open(ops); }
  HostBuffer allocate_io_buffer(std::size_t bytes) override { return mine().allocate_io_buffer(bytes); }

 private:
  ChunkEngine& mine() {
    thread_local std::size_t index = SIZE_MAX;
    if (index == SIZE_MAX) index = next_.fetch_add(1);
    return *members_[index % members_.size()];
  }
  std::vector<ChunkEngine*> members_;
  std::atomic<std::size_t> next_{0};
};

// --shapes: the throughput shapes of issues 16 and 17 only, for the cpu engine alone, the gpu engine
// over the GPUs given (one engine, batches spread over them: "all GPUs"), and --engine auto over the
// same GPUs (the hybrid: every GPU and the cpu engine), built as the mount builds them. Labels name
// the GPUs, so runs with one and with two can be told apart in one log.
int run_shapes(const std::vector<int>& devices, double secs, const std::string& only, const std::string& engines) {
  const auto wanted = [&](const char* e) { return engines.empty() || ("," + engines + ",").find(std::string(",") + e + ",") != std::string::npos; };
  std::string why;
  const auto gpus = list_gpus(&why);
  std::string tag = "[";
  // "+" between GPU numbers: the label is a CSV field.
  for (std::size_t i = 0; i < devices.size(); ++i) tag += (i ? "+" : "") + std::to_string(devices[i]);
  tag += devices.empty() ? "all]" : "]";
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("shapes over GPUs %s of %zu visible, %u cores\n", tag.c_str(), gpus.size(), cores);
  for (const auto& g : gpus)
    std::printf("gpu %d: %s, PCI %s, NUMA node %d\n", g.index, g.name.c_str(), g.pci_bus_id.c_str(), g.numa_node);
  CpuEngine cpu_all(0);
  std::unique_ptr<EngineSet> gpu_set, one_set, nospin_set, launch_set, fed_set, auto_set;
  std::vector<std::unique_ptr<EngineSet>> split_sets;
  std::unique_ptr<ThreadSplitEngine> split;
  if (!gpus.empty()) {
    EngineOptions go;
    go.name = "gpu";
    go.gpu.devices = devices;
    go.small_batches_on_cpu = false;  // the GPU itself, 128 KiB batches included
    if (const char* c = std::getenv("GPUCRYPTFS_RESIDENT_CTAS")) go.gpu.resident_ctas = std::atoi(c);  // experiments
    gpu_set = std::make_unique<EngineSet>(go);
    std::printf("%s\n", gpu_set->description().c_str());
    verify_engine_against_cpu(gpu_set->engine(), 65536);
    if (!engines.empty() && wanted("gpunospin")) {  // leaders poll only when alone (GpuOptions::spin_batch_bytes)
      EngineOptions oo = go;
      oo.gpu.spin_batch_bytes = 0;
      nospin_set = std::make_unique<EngineSet>(oo);
      verify_engine_against_cpu(nospin_set->engine(), 65536);
    }
    if (!engines.empty() && wanted("gpulaunch")) {  // no resident worker: every request launched in batches
      EngineOptions oo = go;
      oo.gpu.resident = false;
      launch_set = std::make_unique<EngineSet>(oo);
      verify_engine_against_cpu(launch_set->engine(), 65536);
    }
    if (wanted("gpuone") && devices.size() != 1 && gpus.size() > 1) {
      // One gpu engine over every GPU (EngineOptions::gpu_engine_per_gpu off), beside the default of
      // one engine per GPU with each batch whole to one of them.
      EngineOptions oo = go;
      oo.gpu_engine_per_gpu = false;
      one_set = std::make_unique<EngineSet>(oo);
      std::printf("gpuone: %s\n", one_set->description().c_str());
      verify_engine_against_cpu(one_set->engine(), 65536);
    }
    if (!engines.empty() && wanted("gpusplit") && devices.size() > 1) {
      std::vector<ChunkEngine*> members;
      for (int d : devices) {
        EngineOptions so = go;
        so.gpu.devices = {d};
        split_sets.push_back(std::make_unique<EngineSet>(so));
        members.push_back(&split_sets.back()->engine());
      }
      split = std::make_unique<ThreadSplitEngine>(members);
    }
    if (wanted("gpufed")) {
      EngineOptions fo = go;
      fo.gpu_feeders = true;  // the trial variant: batches launched by feeder threads, not by callers
      fed_set = std::make_unique<EngineSet>(fo);
      std::printf("%s\n", fed_set->description().c_str());
      verify_engine_against_cpu(fed_set->engine(), 65536);
    }
    EngineOptions ao = go;
    ao.name = "auto";
    if (wanted("auto")) {
      auto_set = std::make_unique<EngineSet>(ao);
      std::printf("%s\n", auto_set->description().c_str());
      verify_engine_against_cpu(auto_set->engine(), 65536);
    }
  } else {
    std::printf("no GPU: %s\n", why.c_str());
  }
  struct Shape {
    std::size_t chunk, request;
    int callers;
  };
  // The last five run only where --only names them: fewer callers of 128 KiB, where leaders poll
  // (GpuOptions::spin_batch_bytes), and small requests.
  const std::size_t kIssueShapes = 4;
  const Shape all_shapes[] = {{65536, 16u << 20, 8}, {65536, 128u << 10, 32}, {65536, 16u << 20, 4}, {65536, 1u << 20, 16},
                              {65536, 128u << 10, 2}, {65536, 128u << 10, 8}, {65536, 128u << 10, 16},
                              {4096, 4096, 32}, {4096, 4096, 8}};
  for (std::size_t si = 0; si < std::size(all_shapes); ++si) {
    const Shape& sh = all_shapes[si];
    const std::string name = std::to_string(sh.callers) + "x" +
                             (sh.request >= (1u << 20) ? std::to_string(sh.request >> 20) + "M" : std::to_string(sh.request >> 10) + "K");
    const bool named = ("," + only + ",").find("," + name + ",") != std::string::npos;
    if (only.empty() ? si >= kIssueShapes : !named) continue;
    for (BenchOp op : {BenchOp::Seal, BenchOp::Open}) {
      if (wanted("cpu")) throughput(cpu_all, "cpu", sh.chunk, sh.request, sh.callers, op, secs);
      if (gpu_set && wanted("gpu")) throughput(gpu_set->engine(), "gpu" + tag, sh.chunk, sh.request, sh.callers, op, secs);
      if (one_set) throughput(one_set->engine(), "gpuone" + tag, sh.chunk, sh.request, sh.callers, op, secs);
      if (split) throughput(*split, "gpusplit" + tag, sh.chunk, sh.request, sh.callers, op, secs);
      if (nospin_set) throughput(nospin_set->engine(), "gpunospin" + tag, sh.chunk, sh.request, sh.callers, op, secs);
      if (launch_set) throughput(launch_set->engine(), "gpulaunch" + tag, sh.chunk, sh.request, sh.callers, op, secs);
      if (fed_set) throughput(fed_set->engine(), "gpufed" + tag, sh.chunk, sh.request, sh.callers, op, secs);
      if (auto_set) throughput(auto_set->engine(), "auto" + tag, sh.chunk, sh.request, sh.callers, op, secs);
    }
    if (auto_set)
      if (auto* h = dynamic_cast<HybridEngine*>(&auto_set->engine()))
        std::printf("auto%s after %s: %s\n", tag.c_str(), name.c_str(), h->describe().c_str());
    if (gpu_set)  // several GPUs: how the batches were shared between them so far
      if (auto* h = dynamic_cast<HybridEngine*>(&gpu_set->engine()))
        std::printf("gpu%s after %s: %s\n", tag.c_str(), name.c_str(), h->describe().c_str());
  }
  if (auto_set)
    if (auto* h = dynamic_cast<HybridEngine*>(&auto_set->engine()))
      std::printf("auto%s after the runs: %s\n", tag.c_str(), h->describe().c_str());
  if (fed_set)
    if (auto* h = dynamic_cast<HybridEngine*>(&fed_set->engine()))
      std::printf("gpufed%s after the runs: %s\n", tag.c_str(), h->describe().c_str());
  print_table();
  return 0;
}

// A stand-in for a GPU on machines without one, for timing the hybrid engine only: it takes as
// long as a device of `gb_per_s` with a fixed round trip would (the caller sleeps, as it does on a
// real GPU's blocking sync), uses no CPU for the data, and leaves the outputs as they are (never
// use it where results matter). Concurrent calls overlap, as batches on a GPU's streams do, up to
// the device's rate: each call waits for its turn on a shared timeline.
class FakeGpu final : public ChunkEngine {
 public:
  FakeGpu(double gb_per_s, double overhead_us) : seconds_per_byte_(1e-9 / gb_per_s), overhead_(overhead_us * 1e-6) {}
  std::string name() const override { return "fake-gpu"; }
  void seal(std::span<ChunkOp> ops) override { run(ops); }
  void open(std::span<ChunkOp> ops) override {
    for (auto& op : ops) op.ok = true;
    run(ops);
  }

 private:
  void run(std::span<ChunkOp> ops) {
    std::size_t bytes = 0;
    for (const auto& op : ops) bytes += op.len;
    using Clock = std::chrono::steady_clock;
    Clock::time_point done;
    {
      std::lock_guard lock(mu_);
      const auto now = Clock::now();
      if (busy_until_ < now) busy_until_ = now;
      busy_until_ += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(static_cast<double>(bytes) * seconds_per_byte_));
      done = busy_until_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(overhead_));
    }
    std::this_thread::sleep_until(done);
  }
  double seconds_per_byte_, overhead_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point busy_until_{};
};

// --fake-gpu GBPS: the hybrid engine (cpu engine + FakeGpu) beside the cpu engine and the fake
// alone, the shapes of --shapes and a 4 KiB one, with the hybrid's per-member figures after each
// shape: what can be profiled of the hybrid on a machine without a GPU (perf record this).
int run_fake_gpu(double gb_per_s, double secs, int threads) {
  CpuEngine cpu(threads > 0 ? static_cast<std::size_t>(threads) : 0);
  FakeGpu fake(gb_per_s, 30);
  HybridEngine::Options ho;
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, 1e-9 / 2}}, {&fake, "fake-gpu", {30e-6, 1e-9 / gb_per_s}}}, ho);
  // The same without leaving the fed member its share of a slot holder's batch, run alternately
  // with the default in one process (A/B on a machine whose load moves).
  HybridEngine::Options hb = ho;
  hb.leave_fed_share = false;
  FakeGpu fake_b(gb_per_s, 30);
  HybridEngine hybrid_b({{&cpu, "cpu", {2e-6, 1e-9 / 2}}, {&fake_b, "fake-gpu", {30e-6, 1e-9 / gb_per_s}}}, hb);
  std::printf("fake GPU of %.1f GB/s and 30 us per call; cpu engine of %zu threads\n", gb_per_s, cpu.threads());
  struct Shape {
    std::size_t chunk, request;
    int callers;
  };
  for (const Shape& sh : {Shape{65536, 16u << 20, 8}, Shape{65536, 128u << 10, 32}, Shape{65536, 16u << 20, 4},
                          Shape{65536, 1u << 20, 16}, Shape{65536, 1u << 20, 1}, Shape{4096, 4096, 1}, Shape{4096, 4096, 8}}) {
    throughput(cpu, "cpu", sh.chunk, sh.request, sh.callers, BenchOp::Seal, secs);
    throughput(fake, "fake-gpu", sh.chunk, sh.request, sh.callers, BenchOp::Seal, secs);
    for (int round = 0; round < 2; ++round) {
      throughput(hybrid, "auto", sh.chunk, sh.request, sh.callers, BenchOp::Seal, secs);
      throughput(hybrid_b, "auto/takeall", sh.chunk, sh.request, sh.callers, BenchOp::Seal, secs);
    }
    std::printf("  auto: %s\n  auto/takeall: %s\n", hybrid.describe().c_str(), hybrid_b.describe().c_str());
  }
  print_table();
  return 0;
}

// Host memory: `threads` threads memcpy between buffers of their own for `seconds`; GB/s copied (the
// memory moves twice that: each byte is read and written). With `while_running`, the copies run
// while it does (and stop when it returns), which is what the hybrid engine asks of the host: its
// cpu threads seal in memory while the GPUs copy to and from it.
double host_copy_gbps(unsigned threads, double seconds, const std::function<void()>& while_running = {}) {
  constexpr std::size_t kBytes = 32u << 20;
  std::atomic<bool> stop{false};
  std::atomic<unsigned> ready{0};
  std::atomic<std::uint64_t> copied{0};
  std::vector<std::thread> pool;
  using Clock = std::chrono::steady_clock;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      std::vector<unsigned char> a(kBytes, 1), b(kBytes, 2);
      ready.fetch_add(1);
      while (!stop.load(std::memory_order_relaxed)) {
        std::memcpy(b.data(), a.data(), kBytes);
        copied.fetch_add(kBytes, std::memory_order_relaxed);
      }
    });
  while (ready.load() < threads) std::this_thread::yield();  // the clock starts once the buffers are filled
  const auto t0 = Clock::now();
  const std::uint64_t before = copied.load();
  if (while_running) while_running();
  else std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  return static_cast<double>(copied.load() - before) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
}

// --probe: the transfer floors of each GPU alone, then of every GPU copying at once (what the host
// carries for all of them: the ceiling of an engine spread over them), then the host's own memory
// copies with every core, alone and while every GPU copies: the ceiling of the hybrid engine.
int run_probe() {
  std::string why;
  const auto gpus = list_gpus(&why);
  if (gpus.empty()) {
    std::printf("no GPU: %s\n", why.c_str());
    return 1;
  }
  std::vector<int> all;
  for (const auto& g : gpus) {
    all.push_back(g.index);
    for (const auto& [name, value] : gpu_transfer_probe(g.index))
      emit({"probe", "gpu" + std::to_string(g.index), name, value, "", 0});
  }
  if (all.size() > 1)
    for (const auto& [name, value] : gpu_transfer_probe_all(all)) emit({"probe", "all", name, value, "", 0});
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  emit({"probe", "host", "memcpy_all_cores_GBps", host_copy_gbps(cores, 1.0), "", 0});
  std::vector<std::pair<std::string, double>> gpus_meanwhile;
  const double host_meanwhile = host_copy_gbps(cores, 0, [&] { gpus_meanwhile = gpu_transfer_probe_all(all); });
  emit({"probe", "host", "memcpy_all_cores_while_gpus_copy_GBps", host_meanwhile, "", 0});
  for (const auto& [name, value] : gpus_meanwhile) emit({"probe", "all", name + "_while_cores_copy", value, "", 0});
  print_table();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, shapes = false, probe_only = false;
  std::string only, engines;
  double fake_gpu = 0, seconds = 0;
  int cpu_threads = 0;
  std::vector<int> devices;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--shapes") == 0) shapes = true;
    else if (std::strcmp(argv[i], "--probe") == 0) probe_only = true;
    else if (std::strcmp(argv[i], "--fake-gpu") == 0 && i + 1 < argc) fake_gpu = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--cpu-threads") == 0 && i + 1 < argc) cpu_threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) devices = parse_gpu_list(argv[++i]);
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (std::strcmp(argv[i], "--engines") == 0 && i + 1 < argc) engines = argv[++i];
    else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = std::atof(argv[++i]);  // per row
    else {
      std::fprintf(stderr, "usage: gpu_engine_bench [--quick | --seconds S] [--probe | --shapes [--gpus LIST] | --fake-gpu GBPS [--cpu-threads N]]\n");
      return 2;
    }
  }
  const double secs = seconds > 0 ? seconds : quick ? 0.3 : 1.0;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("csv,what,engine,detail,value,unit,cpu_s_per_gb\n");
  if (shapes) return run_shapes(devices, secs, only, engines);
  if (probe_only) return run_probe();
  if (fake_gpu > 0) return run_fake_gpu(fake_gpu, secs, cpu_threads);

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

  print_table();
  return 0;
}
