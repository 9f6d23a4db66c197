// The engine factory as the filesystem uses it: --engine gpu and --engine auto (which measures
// its crossover at start) must seal exactly like the cpu engine; without a GPU, gpu refuses with
// the reason and auto says it falls back.
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

TEST(EngineFactory, GpuAndAutoSealLikeTheCpuEngine) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  for (const char* name : {"gpu", "auto"}) {
    EngineOptions o;
    o.name = name;
    EngineSet set(o);
    std::printf("--engine %s: %s\n", name, set.description().c_str());
    EXPECT_NE(set.description().find(std::string(name) == "gpu" ? "gpu engine" : "auto:"), std::string::npos);
    Batch b({65536, 65536, 4096, 17, 0, 1u << 20}, 2);
    CpuEngine cpu(1);
    cpu.seal(b.ref_ops);
    set.engine().seal(b.ops);
    b.expect_same_seal();
    // Both hand out the gpu engine's pinned memory (auto too: its gpu side then skips staging).
    EXPECT_TRUE(set.engine().allocate_io_buffer(4096).pinned()) << name;
  }
}

// --engine gpu on a mount sends batches under the crossover it measured at start to the cpu
// engine (a lone small batch is slower on the GPU, and its driver calls cost more CPU than its
// AES), and the rest to the GPU; both sides seal as the cpu engine does.
TEST(EngineFactory, GpuSendsBatchesUnderTheMeasuredCrossoverToTheCpuEngine) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  EngineOptions o;
  o.name = "gpu";
  EngineSet set(o);
  auto* routed = dynamic_cast<SizeRoutedEngine*>(&set.engine());
  ASSERT_NE(routed, nullptr) << set.description();
  std::printf("%s\n", set.description().c_str());
  EXPECT_EQ(set.engine().name(), "gpu");
  const std::size_t line = routed->below_bytes();
  EXPECT_LE(line, std::size_t{1} << 20);
  // Never under what auto keeps on the CPU, whatever the lone-batch model measured: several 128 KiB
  // batches at once are slower and dearer on the GPU.
  EXPECT_GE(line, HybridEngine::Options{}.inline_bytes);
  Batch small({65536, 65536}, 1);  // 128 KiB, the size of random reads the model once sent to the GPU
  CpuEngine(1).seal(small.ref_ops);
  set.engine().seal(small.ops);
  small.expect_same_seal();
  EXPECT_EQ(routed->small_batches(), 1u);
  std::vector<std::size_t> lens((std::max<std::size_t>(line, 4096) + 65535) / 65536 + 1, 65536);
  Batch large(lens, 2);
  CpuEngine(1).seal(large.ref_ops);
  set.engine().seal(large.ops);
  large.expect_same_seal();
  EXPECT_EQ(routed->large_batches(), 1u);
  EXPECT_TRUE(set.engine().allocate_io_buffer(4096).pinned());
}

// --engine auto on a machine with a GPU is the hybrid engine: large batches from several callers are
// shared between the cpu engine and the GPU, and every chunk comes out as the cpu engine seals it
// and opens back to its plaintext, whichever member took it.
TEST(EngineFactory, AutoSharesLargeBatchesAndMatchesTheCpuEngine) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  EngineOptions o;
  o.name = "auto";
  EngineSet set(o);
  auto* hybrid = dynamic_cast<HybridEngine*>(&set.engine());
  ASSERT_NE(hybrid, nullptr) << set.description();
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int r = 0; r < 6; ++r) {
        std::vector<std::size_t> lens(128, 65536);
        lens.push_back(4097);
        Batch b(lens, 3);
        CpuEngine(1).seal(b.ref_ops);
        set.engine().seal(b.ops);
        for (std::size_t i = 0; i < b.ops.size(); ++i)
          if (b.ref[i] != b.out[i] || b.ref_ops[i].tag != b.ops[i].tag) ++bad;
        auto back = b.prepare_open();
        set.engine().open(b.ops);
        for (std::size_t i = 0; i < b.ops.size(); ++i)
          if (!b.ops[i].ok || back[i] != b.plain[i]) ++bad;
      }
    });
  for (auto& c : callers) c.join();
  std::printf("%s\nafter the test: %s\n", set.description().c_str(), hybrid->describe().c_str());
  EXPECT_EQ(bad.load(), 0);
  const auto stats = hybrid->stats();
  ASSERT_GE(stats.size(), 2u);
  EXPECT_GT(stats[0].bytes, 0u) << "the cpu engine got no share: " << hybrid->describe();
  EXPECT_GT(stats[1].bytes, 0u) << "the GPU got no share: " << hybrid->describe();
}

// A mount's single stream on auto: one caller's large batches are shared with the GPU too (not
// kept on the CPU because nobody else is encrypting); small ones stay on the CPU.
TEST(EngineFactory, AutoSharesALoneCallersLargeBatches) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  EngineOptions o;
  o.name = "auto";
  EngineSet set(o);
  auto* hybrid = dynamic_cast<HybridEngine*>(&set.engine());
  ASSERT_NE(hybrid, nullptr) << set.description();
  Batch small({4096, 4096}, 2);
  CpuEngine(1).seal(small.ref_ops);
  set.engine().seal(small.ops);
  small.expect_same_seal();
  EXPECT_EQ(hybrid->stats()[1].bytes, 0u) << "an 8 KiB batch went to the GPU: " << hybrid->describe();
  for (int r = 0; r < 8; ++r) {
    Batch b(std::vector<std::size_t>(64, 65536), 2);
    CpuEngine(1).seal(b.ref_ops);
    set.engine().seal(b.ops);
    b.expect_same_seal();
  }
  EXPECT_GT(hybrid->stats()[1].bytes, 0u) << "a lone caller's 4 MiB batches never reached the GPU: " << hybrid->describe();
}

// The trial variant of --engine gpu (EngineOptions::gpu_feeders: every batch launched by the GPUs'
// feeder threads from the hybrid engine's queue) seals and opens like the cpu engine, small batches
// included, and the GPUs do the work: the cpu engine is only there for GPUs that fail.
TEST(EngineFactory, GpuFedFromTheQueueMatchesTheCpuEngine) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  EngineOptions o;
  o.name = "gpu";
  o.gpu_feeders = true;
  EngineSet set(o);
  auto* hybrid = dynamic_cast<HybridEngine*>(&set.engine());
  ASSERT_NE(hybrid, nullptr) << set.description();
  EXPECT_EQ(mismatches_from_callers(set.engine(), 6, 4), 0);
  Batch small({4096, 17}, 1);
  CpuEngine(1).seal(small.ref_ops);
  set.engine().seal(small.ops);
  small.expect_same_seal();
  const auto stats = hybrid->stats();
  EXPECT_EQ(stats[0].bytes, 0u) << "the cpu engine did work while the GPU was fine: " << hybrid->describe();
  std::size_t gpu_bytes = 0;
  for (std::size_t i = 1; i < stats.size(); ++i) gpu_bytes += stats[i].bytes;
  EXPECT_GT(gpu_bytes, 0u) << hybrid->describe();
}

// Issue 17: --engine gpu over two GPUs is one gpu engine per GPU, each batch whole to one of them.
// Concurrent callers keep both busy, every chunk comes out as the cpu engine seals it, and when
// GPU 1 fails mid-run its batch is redone on the cpu engine, the log says so, and GPU 0 takes every
// later batch: the cpu engine does none of them.
TEST(EngineFactory, GpuOverTwoGpusSpreadsTheBatchesAndGoesOnWhenOneFails) {
  std::string why;
  if (list_gpus(&why).size() < 2) GTEST_SKIP() << "needs two GPUs";
  std::vector<std::string> errors;
  std::mutex mu;
  EngineOptions o;
  o.name = "gpu";
  o.small_batches_on_cpu = false;
  o.gpu.devices = {0, 1};
  o.gpu.inject_failure_on_device = 1;
  o.gpu.inject_failure_now = std::make_shared<std::atomic<bool>>(false);
  o.gpu.on_error = [&](const std::string& m) {
    std::lock_guard lock(mu);
    errors.push_back(m);
  };
  EngineSet set(o);
  auto* hybrid = dynamic_cast<HybridEngine*>(&set.engine());
  ASSERT_NE(hybrid, nullptr) << set.description();
  EXPECT_EQ(set.engine().name(), "gpu");
  EXPECT_TRUE(set.engine().allocate_io_buffer(4096).pinned());
  EXPECT_EQ(mismatches_from_callers(set.engine(), 8, 3), 0);
  auto stats = hybrid->stats();
  ASSERT_EQ(stats.size(), 3u) << hybrid->describe();
  EXPECT_GT(stats[1].bytes, 0u) << "GPU 0 got nothing: " << hybrid->describe();
  EXPECT_GT(stats[2].bytes, 0u) << "GPU 1 got nothing from 8 callers: " << hybrid->describe();

  o.gpu.inject_failure_now->store(true);
  for (int round = 0; round < 50 && !hybrid->stats()[2].retired; ++round)
    EXPECT_EQ(mismatches_from_callers(set.engine(), 8, 2), 0);
  ASSERT_TRUE(hybrid->stats()[2].retired) << hybrid->describe();
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("GPU 1 failed (injected failure"), std::string::npos) << errors[0];
  }
  const std::size_t gpu0_before = hybrid->stats()[1].bytes;
  EXPECT_EQ(mismatches_from_callers(set.engine(), 4, 3), 0);
  stats = hybrid->stats();
  EXPECT_GT(stats[1].bytes, gpu0_before) << hybrid->describe();
  EXPECT_EQ(stats[0].bytes, 0u) << "the cpu engine took batches while GPU 0 was fine: " << hybrid->describe();
}

TEST(EngineFactory, WithoutAGpuGpuRefusesAndAutoFallsBack) {
  std::string why;
  if (!list_gpus(&why).empty()) GTEST_SKIP() << "a GPU is present; this test covers machines without one";
  EngineOptions o;
  o.name = "gpu";
  try {
    EngineSet set(o);
    FAIL() << "--engine gpu started without a GPU";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu engine"), std::string::npos) << e.what();
  }
  o.name = "auto";
  EngineSet set(o);
  EXPECT_NE(set.description().find("no usable GPU"), std::string::npos) << set.description();
  EXPECT_EQ(set.engine().name(), "cpu");
}

}  // namespace
}  // namespace gcfs
