// The gpu engine against the cpu engine (OpenSSL): bit-identical seal, open of what was sealed,
// tamper detection per chunk, concurrent callers, and the fallback path. Every test that needs a
// GPU skips with the reason when there is none; the no-GPU error is tested everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "cuda/gpu_engine.h"
#include "fs/engine_factory.h"

namespace gcfs {
namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 r(std::random_device{}());
  return r;
}

void fill(std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(rng()());
}

// A batch of ops with its own buffers: plaintext, the cpu engine's ciphertext, the gpu's.
struct Batch {
  std::vector<ChunkKey> keys;
  std::vector<std::vector<std::uint8_t>> plain, aad, ref, out;
  std::vector<ChunkOp> ref_ops, ops;

  Batch(const std::vector<std::size_t>& lengths, std::size_t distinct_keys) : keys(distinct_keys) {
    for (auto& k : keys) fill(k.data(), 32);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      plain.emplace_back(lengths[i]);
      fill(plain.back().data(), lengths[i]);
      aad.emplace_back(rng()() % (kMaxChunkAadBytes + 1));
      fill(aad.back().data(), aad.back().size());
      ref.emplace_back(lengths[i]);
      out.emplace_back(lengths[i]);
    }
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      ChunkOp op;
      op.key = &keys[rng()() % keys.size()];
      fill(op.nonce.data(), op.nonce.size());
      op.aad = aad[i].data();
      op.aad_len = aad[i].size();
      op.in = plain[i].data();
      op.len = lengths[i];
      op.out = ref[i].data();
      ref_ops.push_back(op);
      op.out = out[i].data();
      ops.push_back(op);
    }
  }

  void expect_same_seal() const {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(ref[i], out[i]) << "ciphertext of chunk " << i << " (" << ops[i].len << " bytes)";
      ASSERT_EQ(ref_ops[i].tag, ops[i].tag) << "tag of chunk " << i << " (" << ops[i].len << " bytes)";
    }
  }

  // Turns the gpu-sealed ops into open ops that decrypt into fresh buffers.
  std::vector<std::vector<std::uint8_t>> prepare_open() {
    std::vector<std::vector<std::uint8_t>> back(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      back[i].assign(ops[i].len, 0xEE);
      ops[i].in = out[i].data();
      ops[i].out = back[i].data();
      ops[i].ok = false;
    }
    return back;
  }
};

std::vector<std::size_t> interesting_lengths() {
  std::vector<std::size_t> l = {0, 1, 15, 16, 17, 4095, 100, 65535, 24};
  for (std::size_t s = 4096; s <= (1u << 20); s *= 2) l.push_back(s);
  return l;
}

class GpuEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
    GpuOptions o;
    o.kernel = GetParam();
    o.on_error = [this](const std::string& m) { errors_.push_back(m); };
    gpu_ = make_gpu_engine(o, cpu_);
  }
  CpuEngine cpu_{2};
  std::unique_ptr<ChunkEngine> gpu_;
  std::vector<std::string> errors_;
};

TEST_P(GpuEngineTest, SealsLikeOpensslForEveryLengthAndChunkSize) {
  for (int round = 0; round < 3; ++round) {
    Batch b(interesting_lengths(), 3);  // mixed keys in one batch
    cpu_.seal(b.ref_ops);
    gpu_->seal(b.ops);
    b.expect_same_seal();
  }
  EXPECT_TRUE(errors_.empty());
}

TEST_P(GpuEngineTest, SealsManySmallChunksWithDistinctKeys) {
  std::vector<std::size_t> lengths;
  for (int i = 0; i < 300; ++i) lengths.push_back(rng()() % 5000);
  Batch b(lengths, 150);  // more keys than one launch caches: the engine must split
  cpu_.seal(b.ref_ops);
  gpu_->seal(b.ops);
  b.expect_same_seal();
}

TEST_P(GpuEngineTest, OpensWhatItSealed) {
  Batch b(interesting_lengths(), 2);
  gpu_->seal(b.ops);
  auto back = b.prepare_open();
  gpu_->open(b.ops);
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    EXPECT_TRUE(b.ops[i].ok) << "chunk " << i;
    EXPECT_EQ(back[i], b.plain[i]) << "chunk " << i;
  }
}

TEST_P(GpuEngineTest, TamperedChunksFailAndAreZeroedWhileOthersOpen) {
  std::vector<std::size_t> lengths(8, 4096);
  lengths[6] = 33;
  Batch b(lengths, 2);
  gpu_->seal(b.ops);
  auto back = b.prepare_open();
  b.out[1][100] ^= 0x01;                        // ciphertext bit
  b.ops[3].tag[15] ^= 0x80;                     // tag bit
  std::vector<std::uint8_t> aad5(b.aad[5]);
  aad5.push_back(0);                            // AAD changed (one byte longer)
  b.ops[5].aad = aad5.data();
  b.ops[5].aad_len = aad5.size();
  b.out[6][32] ^= 0x40;                         // last byte of a partial chunk
  gpu_->open(b.ops);
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    const bool tampered = i == 1 || i == 3 || i == 5 || i == 6;
    EXPECT_EQ(b.ops[i].ok, !tampered) << "chunk " << i;
    if (tampered) EXPECT_EQ(back[i], std::vector<std::uint8_t>(lengths[i], 0)) << "chunk " << i << " not zeroed";
    else EXPECT_EQ(back[i], b.plain[i]) << "chunk " << i;
  }
}

TEST_P(GpuEngineTest, OpenInPlaceOfTamperedChunkLeavesZeros) {
  Batch b({4096, 4096}, 1);
  gpu_->seal(b.ops);
  for (auto& op : b.ops) op.in = op.out;  // in == out
  b.out[0][7] ^= 1;
  gpu_->open(b.ops);
  EXPECT_FALSE(b.ops[0].ok);
  EXPECT_TRUE(b.ops[1].ok);
  EXPECT_EQ(b.out[0], std::vector<std::uint8_t>(4096, 0));
  EXPECT_EQ(b.out[1], b.plain[1]);
}

TEST_P(GpuEngineTest, ConcurrentCallersGetTheirOwnResults) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      CpuEngine cpu(1);
      for (int i = 0; i < 15; ++i) {
        std::vector<std::size_t> lengths;
        const std::size_t chunk = std::size_t{4096} << ((t + i) % 5);
        for (int c = 0; c < 1 + (i % 7); ++c) lengths.push_back(c == 0 ? chunk - (i % 3) : chunk);
        Batch b(lengths, 1 + (i % 3));
        cpu.seal(b.ref_ops);
        gpu_->seal(b.ops);
        for (std::size_t k = 0; k < b.ops.size(); ++k)
          if (b.ref[k] != b.out[k] || b.ref_ops[k].tag != b.ops[k].tag) ++failures;
        auto back = b.prepare_open();
        gpu_->open(b.ops);
        for (std::size_t k = 0; k < b.ops.size(); ++k)
          if (!b.ops[k].ok || back[k] != b.plain[k]) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, GpuEngineTest, ::testing::Values("auto", "coarse", "fine"));

TEST(GpuEngineFallback, FailedBatchIsRedoneOnTheFallbackAndReported) {
  std::string why;
  if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  CpuEngine cpu(1);
  std::vector<std::string> errors;
  GpuOptions o;
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

// The engine factory as the filesystem uses it: --engine gpu and --engine auto (which measures
// its crossover at start) must seal exactly like the cpu engine; without a GPU, gpu refuses with
// the reason and auto says it falls back.
namespace gcfs {
namespace {

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
  }
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
