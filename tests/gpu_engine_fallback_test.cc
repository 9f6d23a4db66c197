// The gpu engine's buffers, its fallback to the cpu engine, failover between GPUs and to the
// hybrid, and what it says without a GPU. Tests that need a GPU skip with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "crypto/hybrid_engine.h"
#include "crypto/size_routed_engine.h"
#include "cuda/gpu_engine.h"
#include "mount/engines/engine_factory.h"

#include "tests/support/gpu_batch_fixture.h"

namespace gcfs {
namespace {

using namespace gpu_test;

// A buffer may outlive the engine that made it (a FUSE thread's scratch buffers do).
TEST(GpuEngineBuffers, BufferOutlivesItsEngine) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  CpuEngine cpu(1);
  HostBuffer keep;
  {
    auto gpu = make_gpu_engine(GpuOptions{}, cpu);
    keep = gpu->allocate_io_buffer(1u << 20);
    EXPECT_TRUE(keep.pinned());
  }
  keep.data()[12345] = 7;
  keep = HostBuffer();
}

// Every engine hands out zero-filled memory; the base (cpu) engine's is plain.
TEST(EngineBuffers, CpuEngineHandsOutPlainZeroedMemory) {
  CpuEngine cpu(1);
  HostBuffer b = cpu.allocate_io_buffer(4096);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), 4096u);
  EXPECT_FALSE(b.pinned());
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + 4096), std::vector<std::uint8_t>(4096, 0));
  HostBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.size(), 4096u);
}

TEST(GpuEngineFallback, FailedBatchIsRedoneOnTheFallbackAndReported) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  CpuEngine cpu(1);
  std::vector<std::string> errors;
  GpuOptions o;
  // One GPU: degraded() means every GPU of the engine failed (the hybrid engine makes one gpu
  // engine per GPU, so it retires exactly the one that failed); on a host with two, an engine of
  // both would move GPU 0's work to GPU 1 and rightly not be degraded (the failover test below).
  o.devices = {0};
  o.inject_failure_at_batch = 1;
  o.on_error = [&](const std::string& m) { errors.push_back(m); };
  auto gpu = make_gpu_engine(o, cpu);
  for (int i = 0; i < 3; ++i) {
    Batch b({4096, 17, 65536}, 2);
    cpu.seal(b.ref_ops);
    gpu->seal(b.ops);
    b.expect_same_seal();
    auto back = b.prepare_open();
    gpu->open(b.ops);
    for (std::size_t k = 0; k < b.ops.size(); ++k) EXPECT_TRUE(b.ops[k].ok && back[k] == b.plain[k]);
  }
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("injected failure"), std::string::npos) << errors[0];
  EXPECT_TRUE(gpu->degraded()) << "its only GPU failed: a hybrid engine must stop feeding it";
}


// Issue 17: one engine over two GPUs, and GPU 1 fails mid-run. Its batch goes back to the queue and
// GPU 0 takes it and every later one; the log says so once; nothing falls to the cpu engine for good.
TEST(GpuEngineFailover, WhenOneOfTwoGpusFailsTheOtherTakesItsBatches) {
  std::string why;
  if (list_gpus(&why).size() < 2) GTEST_SKIP() << "needs two GPUs";
  CpuEngine cpu(1);
  std::vector<std::string> errors;
  std::mutex mu;
  GpuOptions o;
  o.devices = {0, 1};
  o.inject_failure_at_batch = 2;  // GPU 1's second batch: 8 callers keep both GPUs' streams busy
  o.inject_failure_on_device = 1;
  o.on_error = [&](const std::string& m) {
    std::lock_guard lock(mu);
    errors.push_back(m);
  };
  auto gpu = make_gpu_engine(o, cpu);
  EXPECT_EQ(mismatches_from_callers(*gpu, 8, 6), 0);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("GPU 1 failed (injected failure"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("go to GPU 0"), std::string::npos) << errors[0];
  EXPECT_FALSE(gpu->degraded()) << "GPU 0 is still there";
  EXPECT_EQ(mismatches_from_callers(*gpu, 4, 4), 0);
  EXPECT_EQ(errors.size(), 1u);
}

// The hybrid engine over a real GPU that fails: the gpu engine redoes its batch on its fallback and
// reports degraded(), the hybrid retires it (saying so once), and every result stays the cpu
// engine's. With no inline slot the GPU gets everything until it fails.
TEST(GpuEngineFailover, TheHybridEngineRetiresAGpuThatFails) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  CpuEngine cpu(2);
  GpuOptions o;
  o.devices = {0};
  o.inject_failure_at_batch = 4;
  o.on_error = [](const std::string&) {};
  auto gpu = make_gpu_engine(o, cpu);
  std::vector<std::string> log;
  std::mutex mu;
  HybridEngine::Options ho;
  ho.inline_slots = 0;
  ho.buffer_member = 1;
  ho.log = [&](const std::string& m) {
    std::lock_guard lock(mu);
    log.push_back(m);
  };
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, 1e-9 / 10}}, {gpu.get(), "gpu0", {30e-6, 1e-9 / 40}}}, ho);
  // Rounds until the GPU's fourth launch has failed: a fast GPU gathers a round's batches into
  // few launches, so how many rounds that takes is the GPU's affair.
  for (int round = 0; round < 50 && !hybrid.stats()[1].retired; ++round)
    EXPECT_EQ(mismatches_from_callers(hybrid, 6, 6), 0);
  ASSERT_TRUE(hybrid.stats()[1].retired) << hybrid.describe();
  ASSERT_EQ(log.size(), 1u) << hybrid.describe();
  EXPECT_NE(log[0].find("gpu0 lost its device"), std::string::npos) << log[0];
  // After the retirement the cpu engine takes the work.
  EXPECT_EQ(mismatches_from_callers(hybrid, 2, 2), 0);
  EXPECT_GT(hybrid.stats()[0].bytes, 0u) << hybrid.describe();
  EXPECT_EQ(log.size(), 1u);
}

TEST(GpuEngineFallback, OversizedChunksGoToTheFallback) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  CpuEngine cpu(1);
  auto gpu = make_gpu_engine(GpuOptions{}, cpu);
  Batch b({(1u << 20) + 16, 4096}, 1);
  cpu.seal(b.ref_ops);
  gpu->seal(b.ops);
  b.expect_same_seal();
}

// The cpu engine behind the gpu engine, counting the batches it is given.
class CountingFallback final : public ChunkEngine {
 public:
  std::string name() const override { return "counting cpu"; }
  void seal(std::span<ChunkOp> ops) override {
    ++batches;
    cpu.seal(ops);
  }
  void open(std::span<ChunkOp> ops) override {
    ++batches;
    cpu.open(ops);
  }
  CpuEngine cpu{1};
  std::atomic<int> batches{0};
};

// A small batch with a key the GPU has no tables for runs on the fallback, until the key has come
// back key_warmup_batches times; then it goes to the GPU, and so does a large batch of a new key
// at once. The results are the cpu engine's every time.
TEST(GpuEngineFallback, SmallBatchesOfColdKeysRunOnTheCpuUntilTheKeyComesBack) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  CountingFallback fallback;
  GpuOptions o;
  o.cold_key_cpu_bytes = 64u << 10;
  o.key_warmup_batches = 3;
  auto gpu = make_gpu_engine(o, fallback);
  Batch small({4096, 4096}, 1);
  fallback.cpu.seal(small.ref_ops);
  for (int round = 1; round <= 4; ++round) {
    gpu->seal(small.ops);
    small.expect_same_seal();
    // Rounds 1 and 2 count towards the warm-up and run on the cpu; round 3 is the third time the
    // key came: the GPU prepares it, and round 4 finds it prepared.
    EXPECT_EQ(fallback.batches.load(), std::min(round, 2)) << "round " << round;
  }
  Batch large(std::vector<std::size_t>(32, 4096), 1);  // 128 KiB of a new key
  fallback.cpu.seal(large.ref_ops);
  gpu->seal(large.ops);
  large.expect_same_seal();
  EXPECT_EQ(fallback.batches.load(), 2) << "a batch of cold_key_cpu_bytes or more goes to the GPU at once";
}

TEST(GpuEngineAvailability, WithoutAGpuMakeGpuEngineNamesTheProblem) {
  std::string why;
  if (!list_gpus(&why).empty()) GTEST_SKIP() << "a GPU is present; this test covers machines without one";
  EXPECT_FALSE(why.empty());
  CpuEngine cpu(1);
  try {
    make_gpu_engine(GpuOptions{}, cpu);
    FAIL() << "make_gpu_engine succeeded without a GPU";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("gpu engine"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
  }
}

TEST(GpuEngineAvailability, KernelVariantsAreNamed) {
  if (!gpu_support_compiled()) GTEST_SKIP() << "built without CUDA";
  const auto v = gpu_kernel_variants();
  EXPECT_NE(std::find(v.begin(), v.end(), "coarse"), v.end());
  EXPECT_NE(std::find(v.begin(), v.end(), "fine"), v.end());
}

}  // namespace
}  // namespace gcfs
