// gpucryptfs bench: sweeps engines, kernel variants, chunk sizes and request sizes through the
// measurement core (fs/engine_bench.h) and reports a table, a CSV and throughput plots.
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <algorithm>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "crypto/gcm_impl.h"
#include "cuda/gpu_engine.h"
#include "fs/engine_bench.h"
#include "mount/bench/bench_plan.h"
#include "mount/bench/bench_progress.h"
#include "mount/bench/bench_report.h"
#include "mount/cli/byte_size.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/engines/kernel_bench.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

constexpr std::size_t kPlotChunk = 64 * 1024;        // the default chunk size of a vault
constexpr std::size_t kPlotRequest = 16 * 1024 * 1024;
constexpr std::size_t kLatencyMaxRequest = 4 * 1024 * 1024;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  return "unknown CPU";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// The engines one run measures; a GPU that cannot be used leaves its members empty and a reason.
struct Engines {
  std::unique_ptr<CpuEngine> cpu_one;
  std::unique_ptr<CpuEngine> cpu_all;
  std::unique_ptr<CpuEngine> gpu_fallback;  // what the gpu engine redoes failed batches on
  std::unique_ptr<ChunkEngine> gpu;
  bool kernels = false;
  std::string gpu_name;
  std::vector<std::string> skipped;  // one line per engine left out, with the reason
};

Engines make_engines(bool cpu, bool gpu, std::size_t cpu_threads) {
  Engines e;
  if (cpu) {
    e.cpu_one = std::make_unique<CpuEngine>(1);
    e.cpu_all = std::make_unique<CpuEngine>(cpu_threads);
  }
  if (!gpu) return e;
  std::string why;
  const auto gpus = list_gpus(&why);
  if (gpus.empty()) {
    e.skipped.push_back("gpu rows skipped: " + why);
    return e;
  }
  e.gpu_name = gpus.front().name;
  try {
    e.gpu_fallback = std::make_unique<CpuEngine>(cpu_threads);
    e.gpu = make_gpu_engine(GpuOptions{}, *e.gpu_fallback);
    // A benchmark of an engine that computes the wrong thing is worthless.
    verify_engine_against_cpu(*e.gpu, kPlotChunk);
  } catch (const std::exception& ex) {
    e.gpu.reset();
    e.skipped.push_back(std::string("gpu engine rows skipped: ") + ex.what());
  }
  if (gpu_kernel_variants().empty()) e.skipped.push_back("gpu kernel rows skipped: this build has no kernel variants");
  else e.kernels = true;
  return e;
}

BenchRow throughput_row(ChunkEngine& engine, const BenchPoint& p, const BenchSweep& sweep, int threads) {
  ThroughputConfig c;
  c.op = p.op == "open" ? BenchOp::Open : BenchOp::Seal;
  c.chunk_size = p.chunk_size;
  c.request_bytes = p.request_bytes;
  c.concurrency = p.concurrency;
  c.min_seconds = sweep.min_seconds;
  c.min_requests = sweep.min_requests;
  const ThroughputResult t = measure_throughput(engine, c);
  BenchRow r;
  r.engine = to_string(p.target);
  r.variant = "-";
  r.threads = threads;
  r.op = p.op;
  r.chunk_size = p.chunk_size;
  r.request_bytes = p.request_bytes;
  r.concurrency = p.concurrency;
  r.bytes = t.bytes;
  r.seconds = t.seconds;
  r.gb_per_s = t.gb_per_s;
  r.cpu_s_per_gb = t.cpu_seconds_per_gb;
  if (sweep.latency && p.concurrency == 1 && p.request_bytes <= kLatencyMaxRequest) {
    LatencyConfig l;
    l.op = c.op;
    l.chunk_size = p.chunk_size;
    l.request_bytes = p.request_bytes;
    // Enough repeats for a stable median without letting large requests dominate the run time.
    const std::size_t budget = sweep.min_seconds < 0.1 ? (8u << 20) : (64u << 20);
    l.repeats = std::clamp<std::size_t>(budget / p.request_bytes, 5, 200);
    l.warmup = std::max<std::size_t>(1, l.repeats / 10);
    r.median_us = measure_latency(engine, l).median_us;
  }
  return r;
}

std::vector<BenchRow> kernel_rows(const BenchPoint& p, std::string* why_not) {
  std::vector<BenchRow> rows;
  for (const auto& k : measure_gpu_kernels(p.chunk_size, p.request_bytes, why_not)) {
    BenchRow r;
    r.engine = "gpu-kernel";
    r.variant = k.variant;
    r.op = k.what;
    r.chunk_size = k.chunk_size;
    r.request_bytes = p.request_bytes;
    r.bytes = k.bytes;
    r.seconds = k.seconds;
    r.gb_per_s = k.gb_per_s;
    rows.push_back(r);
  }
  return rows;
}

// The rows of one point: one for an engine, one per kernel variant and kind for kernel points.
std::vector<BenchRow> measure_point(Engines& e, const BenchPoint& p, const BenchSweep& sweep) {
  switch (p.target) {
    case BenchTarget::CpuOneThread: return {throughput_row(*e.cpu_one, p, sweep, 1)};
    case BenchTarget::CpuAllThreads:
      return {throughput_row(*e.cpu_all, p, sweep, static_cast<int>(e.cpu_all->threads()))};
    case BenchTarget::GpuEngine: return {throughput_row(*e.gpu, p, sweep, 0)};
    case BenchTarget::GpuKernel: {
      std::string why;
      auto rows = kernel_rows(p, &why);
      if (rows.empty()) throw std::runtime_error("no kernel rows: " + why);
      return rows;
    }
  }
  return {};
}

std::string describe(const BenchPoint& p) {
  return std::string(to_string(p.target)) + " " + p.op + " chunk " + short_size(p.chunk_size) + " request " +
         short_size(p.request_bytes) + (p.concurrency > 1 ? " x" + std::to_string(p.concurrency) : "");
}

int run_bench(int argc, char** argv) {
  bool quick = false;
  std::string engine = "all", out_dir = "gpucryptfs-bench", op = "seal";
  std::size_t threads = 0;
  po::options_description desc(
      "usage: gpucryptfs bench [--quick] [--engine cpu|gpu|all] [--op seal|open|both] [--out DIR]\n\n"
      "Measures the cipher engines over chunk and request sizes: a table, bench.csv and plots in DIR.\n\noptions");
  desc.add_options()("help,h", "this help")
      ("quick", po::bool_switch(&quick), "a coarse sweep that ends within a minute")
      ("engine", po::value(&engine)->default_value(engine), "cpu, gpu or all")
      ("op", po::value(&op)->default_value(op), "seal, open or both")
      ("threads", po::value(&threads)->default_value(0), "threads of the all-threads cpu engine (0: every core)")
      ("out", po::value(&out_dir)->default_value(out_dir), "folder for bench.csv, bench.gp and the PNG plots");
  // No positional arguments: a stray word (a typo'd option value) is refused, not silently
  // ignored while the full multi-minute sweep starts.
  if (!parse_command_line(argc, argv, desc, {})) return kExitOk;
  if (engine != "cpu" && engine != "gpu" && engine != "all") throw po::error("--engine must be cpu, gpu or all");
  if (op != "seal" && op != "open" && op != "both") throw po::error("--op must be seal, open or both");

  BenchSweep sweep = default_sweep(quick);
  sweep.ops = op == "both" ? std::vector<std::string>{"seal", "open"} : std::vector<std::string>{op};
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw UserError("cannot create the output folder " + out_dir + ": " + ec.message());

  Engines e = make_engines(engine != "gpu", engine != "cpu", threads);
  for (const auto& s : e.skipped) std::cerr << "gpucryptfs bench: " << s << "\n";
  const auto points = plan_points(sweep, e.cpu_one != nullptr, e.gpu != nullptr, e.kernels);
  std::cerr << "gpucryptfs bench: " << points.size() << " points (" << (quick ? "quick" : "full") << " sweep)\n";

  std::vector<BenchRow> rows;
  std::vector<std::string> failed;  // a point that throws is reported, the sweep goes on
  {
    ProgressBar bar(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
      const BenchPoint& p = points[i];
      bar.update(i, describe(p));
      try {
        for (auto& r : measure_point(e, p, sweep)) rows.push_back(std::move(r));
      } catch (const std::exception& ex) {
        failed.push_back(describe(p) + ": " + ex.what());
      }
    }
    bar.finish();
  }

  const std::string title = cpu_model() + (e.gpu_name.empty() ? "" : ", " + e.gpu_name) + ", " + utc_now();
  std::cout << "gpucryptfs bench, " << title << "\n";
  if (e.cpu_one) std::cout << "cpu engine: " << gcm_description() << "\n";
  std::cout << "\n";
  print_table(std::cout, rows);
  const std::string summary = crossover_summary(rows, kPlotChunk);
  if (!summary.empty()) std::cout << "\n" << summary << "\n";
  for (const auto& s : e.skipped) std::cout << s << "\n";
  for (const auto& f : failed) std::cout << "point failed, left out: " << f << "\n";

  const std::string csv = out_dir + "/bench.csv";
  write_csv(csv, rows);
  std::cout << "\nwrote " << csv << " (" << rows.size() << " rows)\n";
  const PlotOutcome plots = write_plots(out_dir, rows, kPlotChunk, kPlotRequest, title);
  for (const auto& png : plots.images) std::cout << "wrote " << png << "\n";
  if (!plots.note.empty()) std::cout << "plots: " << plots.note << "\n";
  if (!failed.empty()) {
    std::cerr << "gpucryptfs bench: " << failed.size() << " of " << points.size()
              << " points failed (listed above); the others are in the CSV\n";
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

int cmd_bench(int argc, char** argv) { return run_command("bench", [&] { return run_bench(argc, argv); }); }

}  // namespace gcfs::cli
