// CpuEngine throughput: seal and open of one FUSE-request-sized batch per iteration, for every
// chunk size a vault may use, on one thread and on all of them. Not a test: numbers only, for
// comparing builds and machines and for choosing the gpu engine's crossover.
//
//   bench_cpu_engine --benchmark_filter='Seal/65536'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/hybrid_engine.h"

namespace gcfs {
namespace {

// The largest request FUSE hands over (max_write of 1 MiB), or one chunk where chunks are larger.
constexpr std::size_t kBatchBytes = 1 << 20;

struct Fixture {
  ChunkKey key;
  std::vector<std::uint8_t> in, out, aad;
  std::vector<ChunkOp> ops;

  explicit Fixture(std::size_t chunk) {
    std::mt19937 rng(1);
    for (auto& b : key.bytes) b = static_cast<std::uint8_t>(rng());
    const std::size_t n = std::max<std::size_t>(1, kBatchBytes / chunk);
    in.resize(n * chunk);
    for (auto& b : in) b = static_cast<std::uint8_t>(rng());
    out.resize(in.size());
    aad.resize(24 * n);
    ops.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      ChunkOp& op = ops[i];
      op.key = &key;
      for (auto& b : op.nonce) b = static_cast<std::uint8_t>(rng());
      op.aad = aad.data() + 24 * i;
      op.aad_len = 24;
      op.in = in.data() + i * chunk;
      op.out = out.data() + i * chunk;
      op.len = chunk;
    }
  }
};

std::size_t threads_arg(const benchmark::State& state) {
  return state.range(1) == 0 ? std::max(1u, std::thread::hardware_concurrency()) : static_cast<std::size_t>(state.range(1));
}

void BM_Seal(benchmark::State& state) {
  const std::size_t chunk = static_cast<std::size_t>(state.range(0));
  CpuEngine engine(threads_arg(state));
  Fixture f(chunk);
  for (auto _ : state) {
    engine.seal(f.ops);
    benchmark::DoNotOptimize(f.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(f.in.size()));
  state.counters["threads"] = static_cast<double>(engine.threads());
  state.counters["chunks_per_batch"] = static_cast<double>(f.ops.size());
}

void BM_Open(benchmark::State& state) {
  const std::size_t chunk = static_cast<std::size_t>(state.range(0));
  CpuEngine engine(threads_arg(state));
  Fixture f(chunk);
  engine.seal(f.ops);
  // Open the sealed chunks back into the input buffers: every op authenticates.
  for (std::size_t i = 0; i < f.ops.size(); ++i) {
    f.ops[i].in = f.out.data() + i * chunk;
    f.ops[i].out = f.in.data() + i * chunk;
  }
  for (auto _ : state) {
    engine.open(f.ops);
    benchmark::DoNotOptimize(f.in.data());
    benchmark::ClobberMemory();
  }
  for (const auto& op : f.ops)
    if (!op.ok) state.SkipWithError("a chunk failed authentication");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(f.in.size()));
  state.counters["threads"] = static_cast<double>(engine.threads());
}

// One 4 KiB chunk per call, the cpu engine alone beside the hybrid engine over it (with a second
// member that such a small batch never reaches): what `--engine auto` adds to a small FUSE request.
// Compare the CPU time per iteration of the two.
void BM_SealSmallCpu(benchmark::State& state) {
  CpuEngine engine(1);
  Fixture f(4096);
  std::span<ChunkOp> one(f.ops.data(), 1);
  for (auto _ : state) {
    engine.seal(one);
    benchmark::ClobberMemory();
  }
}

void BM_SealSmallHybrid(benchmark::State& state) {
  CpuEngine engine(1), other(1);
  HybridEngine hybrid({{&engine, "cpu", {2e-6, 1e-9}}, {&other, "other", {30e-6, 1e-10}}});
  Fixture f(4096);
  std::span<ChunkOp> one(f.ops.data(), 1);
  for (auto _ : state) {
    hybrid.seal(one);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_SealSmallCpu)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_SealSmallHybrid)->Repetitions(5)->ReportAggregatesOnly(true);

// Chunk sizes 4 KiB .. 1 MiB; threads 1 and 0 (all cores).
void Args(benchmark::internal::Benchmark* b) {
  for (std::int64_t chunk = 4096; chunk <= (1 << 20); chunk *= 4)
    for (std::int64_t threads : {1, 0}) b->Args({chunk, threads});
  b->ArgNames({"chunk", "threads"});
  b->UseRealTime();
}

BENCHMARK(BM_Seal)->Apply(Args);
BENCHMARK(BM_Open)->Apply(Args);

}  // namespace
}  // namespace gcfs

BENCHMARK_MAIN();
