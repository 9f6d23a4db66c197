// The gpu engine against the cpu engine (OpenSSL): bit-identical seal, open of what was sealed,
// tamper detection per chunk, concurrent callers, batches in pinned buffers. Every test that needs
// a GPU skips with the reason when there is none.
// The fallback path, failover and the engine factory: gpu_engine_fallback_test.cc and
// engine_factory_test.cc; what they share: tests/support/gpu_batch_fixture.h.
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

class GpuEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (list_gpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
    GpuOptions o;
    o.kernel = GetParam();
    if (o.kernel == "auto-unfused") o.kernel = "auto", o.fused = false;  // two launches for small batches too
    if (o.kernel == "auto-copied") o.kernel = "auto", o.direct = false;  // fused, but data copied, not mapped
    // Requests in engine memory go to the resident worker only under "resident", so that the
    // other variants keep covering the launched batches.
    // "resident-split" splits every chunk of two GHASH segments or more over several CTAs (up to
    // 16), where the defaults split only chunks of 32 KiB or more, by at most 4.
    if (o.kernel == "resident-split") o.kernel = "resident", o.resident_max_parts = 16, o.resident_min_part_bytes = 2048;
    o.resident = o.kernel == "resident";
    if (o.kernel == "resident") o.kernel = "auto";
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

// Zero-copy: ops whose data lies in the engine's own (pinned) buffers travel to and from the GPU
// without the staging copies. Chunks are laid out as the filesystem lays them out, with a stride
// (nonce and tag between chunks on disk), so that runs of them go as one 2D copy.
struct PinnedLayout {
  static constexpr std::size_t kGap = 28;  // nonce + tag, as between chunks on disk
  std::vector<std::size_t> lengths;
  std::size_t stride = 0;
  HostBuffer buf;
  PinnedLayout(ChunkEngine& e, std::vector<std::size_t> l, std::size_t gap = kGap) : lengths(std::move(l)) {
    for (auto n : lengths) stride = std::max(stride, n + gap);
    buf = e.allocate_io_buffer(stride * lengths.size());
  }
  std::uint8_t* at(std::size_t i) const { return buf.data() + i * stride; }
};

TEST_P(GpuEngineTest, ZeroCopySealAndOpenMatchOpenssl) {
  std::vector<std::size_t> lengths(9, 65536);
  lengths.back() = 1000;  // the last chunk of a file is shorter: a run of 8, then one
  for (int round = 0; round < 2; ++round) {
    Batch b(lengths, 1);
    PinnedLayout in(*gpu_, lengths), ct(*gpu_, lengths), back(*gpu_, lengths, 0);
    ASSERT_TRUE(in.buf.pinned());
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      std::memcpy(in.at(i), b.plain[i].data(), lengths[i]);
      b.ops[i].in = in.at(i);
      b.ops[i].out = ct.at(i);
    }
    cpu_.seal(b.ref_ops);
    gpu_->seal(b.ops);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(ct.at(i), b.ref[i].data(), lengths[i])) << "chunk " << i;
      ASSERT_EQ(b.ops[i].tag, b.ref_ops[i].tag) << "chunk " << i;
      b.ops[i].in = ct.at(i);
      b.ops[i].out = back.at(i);
    }
    gpu_->open(b.ops);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      EXPECT_TRUE(b.ops[i].ok) << "chunk " << i;
      EXPECT_EQ(0, std::memcmp(back.at(i), b.plain[i].data(), lengths[i])) << "chunk " << i;
    }
  }
  EXPECT_TRUE(errors_.empty());
}

// Seals b's plaintext in place in buf (engine memory) and checks it against OpenSSL's.
void seal_in_place_like_openssl(ChunkEngine& gpu, ChunkEngine& cpu, Batch& b, PinnedLayout& buf) {
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    std::memcpy(buf.at(i), b.plain[i].data(), buf.lengths[i]);
    b.ops[i].in = b.ops[i].out = buf.at(i);
  }
  cpu.seal(b.ref_ops);
  gpu.seal(b.ops);
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(buf.at(i), b.ref[i].data(), buf.lengths[i])) << "chunk " << i;
    ASSERT_EQ(b.ops[i].tag, b.ref_ops[i].tag) << "chunk " << i;
  }
}

TEST_P(GpuEngineTest, ZeroCopyInPlace) {
  std::vector<std::size_t> lengths = {4096, 4096, 4096, 17, 65536, 0};
  Batch b(lengths, 2);
  PinnedLayout buf(*gpu_, lengths);
  ASSERT_NO_FATAL_FAILURE(seal_in_place_like_openssl(*gpu_, cpu_, b, buf));
  gpu_->open(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_TRUE(b.ops[i].ok) << "chunk " << i;
    EXPECT_EQ(0, std::memcmp(buf.at(i), b.plain[i].data(), lengths[i])) << "chunk " << i;
  }
}

// In place in engine memory with no empty chunk (the resident worker takes such a request; an
// empty chunk sends it to the launched batches): sealed in place like OpenSSL, and opened in place
// with one chunk tampered: that chunk comes back as zeros and not ok, the others as plaintext.
TEST_P(GpuEngineTest, ZeroCopyInPlaceWithATamperedChunk) {
  std::vector<std::size_t> lengths = {65536, 4096, 1000, 65536};
  Batch b(lengths, 2);
  PinnedLayout buf(*gpu_, lengths);
  ASSERT_NO_FATAL_FAILURE(seal_in_place_like_openssl(*gpu_, cpu_, b, buf));
  buf.at(1)[100] ^= 0x40;
  gpu_->open(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (i == 1) {
      EXPECT_FALSE(b.ops[i].ok);
      EXPECT_EQ(std::vector<std::uint8_t>(buf.at(i), buf.at(i) + lengths[i]), std::vector<std::uint8_t>(lengths[i], 0));
    } else {
      EXPECT_TRUE(b.ops[i].ok) << "chunk " << i;
      EXPECT_EQ(0, std::memcmp(buf.at(i), b.plain[i].data(), lengths[i])) << "chunk " << i;
    }
  }
  EXPECT_TRUE(errors_.empty());
}

TEST_P(GpuEngineTest, ZeroCopyMixedWithOrdinaryMemoryInOneBatch) {
  std::vector<std::size_t> lengths = {65536, 65536, 4096, 4095, 65536, 65536, 32, 65536};
  Batch b(lengths, 3);
  PinnedLayout in(*gpu_, lengths), out(*gpu_, lengths);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    // i % 4: both pinned, only in pinned, only out pinned, neither (the Batch's own vectors).
    if (i % 4 == 0 || i % 4 == 1) {
      std::memcpy(in.at(i), b.plain[i].data(), lengths[i]);
      b.ops[i].in = in.at(i);
    }
    if (i % 4 == 0 || i % 4 == 2) b.ops[i].out = out.at(i);
  }
  cpu_.seal(b.ref_ops);
  gpu_->seal(b.ops);
  std::vector<std::vector<std::uint8_t>> back(lengths.size());
  PinnedLayout back_pinned(*gpu_, lengths);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(b.ops[i].out, b.ref[i].data(), lengths[i])) << "chunk " << i;
    ASSERT_EQ(b.ops[i].tag, b.ref_ops[i].tag) << "chunk " << i;
    b.ops[i].in = b.ops[i].out;
    back[i].assign(lengths[i], 0xEE);
    b.ops[i].out = i % 3 == 0 ? back_pinned.at(i) : back[i].data();
  }
  gpu_->open(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_TRUE(b.ops[i].ok) << "chunk " << i;
    EXPECT_EQ(0, std::memcmp(b.ops[i].out, b.plain[i].data(), lengths[i])) << "chunk " << i;
  }
}

TEST_P(GpuEngineTest, ZeroCopyTamperedChunksFailAndAreZeroed) {
  std::vector<std::size_t> lengths(6, 65536);
  lengths[4] = 33;
  Batch b(lengths, 1);
  PinnedLayout in(*gpu_, lengths), ct(*gpu_, lengths), back(*gpu_, lengths, 0);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    std::memcpy(in.at(i), b.plain[i].data(), lengths[i]);
    b.ops[i].in = in.at(i);
    b.ops[i].out = ct.at(i);
  }
  gpu_->seal(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    b.ops[i].in = ct.at(i);
    b.ops[i].out = back.at(i);
    std::memset(back.at(i), 0xEE, lengths[i]);
  }
  ct.at(1)[100] ^= 0x01;     // ciphertext bit
  b.ops[2].tag[0] ^= 0x01;   // tag bit
  ct.at(4)[32] ^= 0x40;      // last byte of a partial chunk
  gpu_->open(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const bool tampered = i == 1 || i == 2 || i == 4;
    EXPECT_EQ(b.ops[i].ok, !tampered) << "chunk " << i;
    if (tampered) EXPECT_EQ(std::vector<std::uint8_t>(back.at(i), back.at(i) + lengths[i]), std::vector<std::uint8_t>(lengths[i], 0)) << "chunk " << i << " not zeroed";
    else EXPECT_EQ(0, std::memcmp(back.at(i), b.plain[i].data(), lengths[i])) << "chunk " << i;
  }
}

// Seals chunks of the given lengths from engine memory into engine memory and checks them against
// OpenSSL, then lets tamper() change the ciphertext or the tags and opens them back into engine
// memory: exactly the chunks in `tampered` must come back refused and zeroed, the rest as plaintext.
void zero_copy_seal_and_open(ChunkEngine& gpu, ChunkEngine& cpu, const std::vector<std::size_t>& lengths,
                             std::size_t keys, const std::function<void(Batch&, PinnedLayout&)>& tamper,
                             const std::set<std::size_t>& tampered) {
  Batch b(lengths, keys);
  PinnedLayout in(gpu, lengths), ct(gpu, lengths), back(gpu, lengths, 0);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    std::memcpy(in.at(i), b.plain[i].data(), lengths[i]);
    b.ops[i].in = in.at(i);
    b.ops[i].out = ct.at(i);
  }
  cpu.seal(b.ref_ops);
  gpu.seal(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(ct.at(i), b.ref[i].data(), lengths[i])) << "chunk " << i;
    ASSERT_EQ(b.ops[i].tag, b.ref_ops[i].tag) << "chunk " << i;
    b.ops[i].in = ct.at(i);
    b.ops[i].out = back.at(i);
    std::memset(back.at(i), 0xEE, lengths[i]);
  }
  tamper(b, ct);
  gpu.open(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const bool bad = tampered.count(i) > 0;
    EXPECT_EQ(b.ops[i].ok, !bad) << "chunk " << i;
    if (bad) EXPECT_EQ(std::vector<std::uint8_t>(back.at(i), back.at(i) + lengths[i]), std::vector<std::uint8_t>(lengths[i], 0)) << "chunk " << i << " not zeroed";
    else EXPECT_EQ(0, std::memcmp(back.at(i), b.plain[i].data(), lengths[i])) << "chunk " << i;
  }
}

// Zero-copy chunks of many lengths, one caller (so the resident worker has CTAs to spare and
// splits what it can): sealed like OpenSSL with random AAD, opened back, and a chunk tampered in its
// last part and one in its first refused and zeroed whole, whichever part finished last.
TEST_P(GpuEngineTest, ZeroCopyChunksOfEveryLengthSealAndOpenWholeOrSplit) {
  const std::vector<std::size_t> lengths = {1u << 20, 65535, 4097, 8191, 32768 + 16, 2048, 1, 300000, 65536, 65536};
  for (int round = 0; round < 3; ++round)
    ASSERT_NO_FATAL_FAILURE(zero_copy_seal_and_open(*gpu_, cpu_, lengths, 2, [](Batch&, PinnedLayout& ct) {
      ct.at(0)[(1u << 20) - 5] ^= 0x10;  // the last part of the largest chunk
      ct.at(8)[3] ^= 0x02;               // the first part of a 64 KiB chunk
    }, {0, 8}));
  EXPECT_TRUE(errors_.empty());
}

// A direct batch with more descriptors than the launch's parameters hold (100 chunks of 4 KiB, as
// 100 small requests gathered would be): its header goes to the GPU first, the data still moves in
// the kernel. Sealed as OpenSSL does, opened back, tampered chunks refused and zeroed.
TEST_P(GpuEngineTest, ZeroCopyBatchOfManyDescriptors) {
  std::vector<std::size_t> lengths(100, 4096);
  lengths[57] = 1000;
  lengths.back() = 17;
  ASSERT_NO_FATAL_FAILURE(zero_copy_seal_and_open(*gpu_, cpu_, lengths, 3, [](Batch& b, PinnedLayout& ct) {
    ct.at(40)[7] ^= 0x01;
    b.ops[99].tag[3] ^= 0x80;
  }, {40, 99}));
  EXPECT_TRUE(errors_.empty());
}

// The benchmark's shape: 32 callers of 128 KiB each (two 64 KiB chunks) in engine memory, whose
// requests the engine gathers into batches of many descriptors. Every caller gets its own results.
TEST_P(GpuEngineTest, ManyCallersOfSmallPinnedRequests) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 32; ++t) {
    threads.emplace_back([&] {
      CpuEngine cpu(1);
      const std::vector<std::size_t> lengths(2, 65536);
      PinnedLayout in(*gpu_, lengths), ct(*gpu_, lengths), back(*gpu_, lengths, 0);
      for (int r = 0; r < 20; ++r) {
        Batch b(lengths, 1);
        for (std::size_t i = 0; i < lengths.size(); ++i) {
          std::memcpy(in.at(i), b.plain[i].data(), lengths[i]);
          b.ops[i].in = in.at(i);
          b.ops[i].out = ct.at(i);
        }
        cpu.seal(b.ref_ops);
        gpu_->seal(b.ops);
        for (std::size_t i = 0; i < lengths.size(); ++i) {
          if (std::memcmp(ct.at(i), b.ref[i].data(), lengths[i]) != 0 || b.ops[i].tag != b.ref_ops[i].tag) ++failures;
          b.ops[i].in = ct.at(i);
          b.ops[i].out = back.at(i);
        }
        gpu_->open(b.ops);
        for (std::size_t i = 0; i < lengths.size(); ++i)
          if (!b.ops[i].ok || std::memcmp(back.at(i), b.plain[i].data(), lengths[i]) != 0) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(errors_.empty());
}

TEST_P(GpuEngineTest, ZeroCopyLargeRequestAcrossStreams) {
  std::vector<std::size_t> lengths(64, 65536);  // 4 MiB: cut into parts on several streams
  Batch b(lengths, 1);
  PinnedLayout in(*gpu_, lengths), ct(*gpu_, lengths);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    std::memcpy(in.at(i), b.plain[i].data(), lengths[i]);
    b.ops[i].in = in.at(i);
    b.ops[i].out = ct.at(i);
  }
  cpu_.seal(b.ref_ops);
  gpu_->seal(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(ct.at(i), b.ref[i].data(), lengths[i])) << "chunk " << i;
    ASSERT_EQ(b.ops[i].tag, b.ref_ops[i].tag) << "chunk " << i;
  }
}

// Direct batches (the kernel reads and writes the caller's pinned memory itself) must touch exactly
// each op's bytes: the bytes around them, even inside the same 4-byte word, keep their canary, for
// sealing, opening, and opening chunks that fail. An op at an odd address is not direct; it must
// come out right all the same.
TEST_P(GpuEngineTest, DirectBatchesTouchOnlyTheirOwnBytes) {
  const std::vector<std::size_t> lengths = {1, 15, 17, 33, 4095, 4097, 65535, 2};
  constexpr std::uint8_t kCanary = 0xA5;
  Batch b(lengths, 2);
  std::vector<std::size_t> at(lengths.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    at[i] = total + (i == 3 ? 1 : 0);  // op 3 starts at an odd address
    total = (at[i] + lengths[i] + 3) / 4 * 4 + 4;
  }
  HostBuffer in = gpu_->allocate_io_buffer(total), ct = gpu_->allocate_io_buffer(total),
             back = gpu_->allocate_io_buffer(total);
  std::memset(in.data(), kCanary, total);
  std::memset(ct.data(), kCanary, total);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    std::memcpy(in.data() + at[i], b.plain[i].data(), lengths[i]);
    b.ops[i].in = in.data() + at[i];
    b.ops[i].out = ct.data() + at[i];
  }
  auto outside_is_canary = [&](const HostBuffer& buf) {
    std::vector<char> inside(total, 0);
    for (std::size_t i = 0; i < lengths.size(); ++i) std::fill_n(inside.begin() + at[i], lengths[i], 1);
    for (std::size_t k = 0; k < total; ++k)
      if (!inside[k] && buf.data()[k] != kCanary) return ::testing::AssertionFailure() << "byte " << k << " was written";
    return ::testing::AssertionSuccess();
  };
  cpu_.seal(b.ref_ops);
  gpu_->seal(b.ops);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(ct.data() + at[i], b.ref[i].data(), lengths[i])) << "chunk " << i;
    ASSERT_EQ(b.ops[i].tag, b.ref_ops[i].tag) << "chunk " << i;
  }
  EXPECT_TRUE(outside_is_canary(ct));
  for (int tamper = 0; tamper < 2; ++tamper) {
    std::memset(back.data(), kCanary, total);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      b.ops[i].in = ct.data() + at[i];
      b.ops[i].out = back.data() + at[i];
    }
    if (tamper) ct.data()[at[2] + 16] ^= 0x80, ct.data()[at[6]] ^= 0x01;
    gpu_->open(b.ops);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      const bool bad = tamper && (i == 2 || i == 6);
      EXPECT_EQ(b.ops[i].ok, !bad) << "chunk " << i;
      if (bad) EXPECT_EQ(std::vector<std::uint8_t>(back.data() + at[i], back.data() + at[i] + lengths[i]),
                         std::vector<std::uint8_t>(lengths[i], 0)) << "chunk " << i << " not zeroed";
      else EXPECT_EQ(0, std::memcmp(back.data() + at[i], b.plain[i].data(), lengths[i])) << "chunk " << i;
    }
    EXPECT_TRUE(outside_is_canary(back));
  }
  EXPECT_TRUE(errors_.empty());
}

// Chunks of equal length from several callers' pinned buffers, gathered into one batch (the
// bench's eight callers of one 256 KiB chunk each): the engine copies consecutive chunks of one
// buffer with one 2D copy, and must not stretch such a copy across two buffers. On the H100 that
// failed with "invalid argument" and sent every later batch to the fallback engine.
TEST_P(GpuEngineTest, ChunksFromSeveralPinnedBuffersInOneBatch) {
  // One chunk per buffer, as each caller brings its own: any two neighbours in a piece of the
  // batch look like a run with some stride.
  constexpr std::size_t kLen = 256u << 10, kPerBuffer = 1, kBuffers = 8;
  Batch b(std::vector<std::size_t>(kPerBuffer * kBuffers, kLen), 3);
  std::vector<HostBuffer> ins, outs, backs;
  for (std::size_t k = 0; k < kBuffers; ++k) {
    ins.push_back(gpu_->allocate_io_buffer(kPerBuffer * kLen));
    outs.push_back(gpu_->allocate_io_buffer(kPerBuffer * kLen));
    backs.push_back(gpu_->allocate_io_buffer(kPerBuffer * kLen));
  }
  // Ascending addresses, so that the buffers' strides could pass for one run.
  auto by_address = [](const HostBuffer& x, const HostBuffer& y) { return x.data() < y.data(); };
  std::sort(ins.begin(), ins.end(), by_address);
  std::sort(outs.begin(), outs.end(), by_address);
  std::sort(backs.begin(), backs.end(), by_address);
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    std::uint8_t* in = ins[i / kPerBuffer].data() + (i % kPerBuffer) * kLen;
    std::memcpy(in, b.plain[i].data(), kLen);
    b.ops[i].in = in;
    b.ops[i].out = outs[i / kPerBuffer].data() + (i % kPerBuffer) * kLen;
  }
  cpu_.seal(b.ref_ops);
  gpu_->seal(b.ops);
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(b.ops[i].out, b.ref[i].data(), kLen)) << "chunk " << i;
    ASSERT_EQ(b.ops[i].tag, b.ref_ops[i].tag) << "chunk " << i;
  }
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    b.ops[i].in = b.ops[i].out;
    b.ops[i].out = backs[i / kPerBuffer].data() + (i % kPerBuffer) * kLen;
    b.ops[i].ok = false;
  }
  gpu_->open(b.ops);
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    EXPECT_TRUE(b.ops[i].ok) << "chunk " << i;
    EXPECT_EQ(0, std::memcmp(b.ops[i].out, b.plain[i].data(), kLen)) << "chunk " << i;
  }
  EXPECT_TRUE(errors_.empty()) << errors_.front();
}

INSTANTIATE_TEST_SUITE_P(Kernels, GpuEngineTest,
                         ::testing::Values("auto", "coarse", "fine", "auto-unfused", "auto-copied", "resident",
                                           "resident-split"));

}  // namespace
}  // namespace gcfs
