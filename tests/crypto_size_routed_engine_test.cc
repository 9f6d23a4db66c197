// SizeRoutedEngine (what `--engine gpu` is on a mount): batches under the crossover go to the small
// engine, the rest to the large one, with the same bytes out either way.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/random.h"
#include "crypto/size_routed_engine.h"

namespace gcfs {
namespace {

// A cpu engine that counts the batches and bytes it was given, and names itself.
class Counting final : public ChunkEngine {
 public:
  explicit Counting(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void seal(std::span<ChunkOp> ops) override { count(ops), cpu_.seal(ops); }
  void open(std::span<ChunkOp> ops) override { count(ops), cpu_.open(ops); }
  HostBuffer allocate_io_buffer(std::size_t bytes) override {
    ++buffers;
    return HostBuffer::plain(bytes);
  }
  std::atomic<int> batches{0}, buffers{0};
  std::atomic<std::size_t> bytes{0};

 private:
  void count(std::span<const ChunkOp> ops) {
    ++batches;
    for (const auto& op : ops) bytes += op.len;
  }
  std::string name_;
  CpuEngine cpu_{1};
};

struct Batch {
  ChunkKey key;
  std::vector<std::vector<std::uint8_t>> plain, out;
  std::vector<ChunkOp> ops;
  explicit Batch(const std::vector<std::size_t>& lens) {
    random_bytes(std::span<std::uint8_t>(key.data(), key.size()));
    for (std::size_t len : lens) {
      plain.emplace_back(len);
      if (len) random_bytes(plain.back());
      out.emplace_back(len);
    }
    for (std::size_t i = 0; i < lens.size(); ++i) {
      ChunkOp op;
      op.key = &key;
      random_bytes(op.nonce);
      op.in = plain[i].data();
      op.out = out[i].data();
      op.len = lens[i];
      ops.push_back(op);
    }
  }
};

TEST(SizeRoutedEngine, SmallBatchesGoToTheSmallEngineAndTheRestToTheLarge) {
  Counting small("cpu"), large("gpu");
  SizeRoutedEngine routed(small, large, 64u << 10);
  EXPECT_EQ(routed.name(), "gpu");  // the engine the user chose

  Batch lone({4096});
  routed.seal(lone.ops);
  EXPECT_EQ(small.batches, 1);
  EXPECT_EQ(large.batches, 0);

  Batch just_under({32768, 32767});
  routed.seal(just_under.ops);
  EXPECT_EQ(small.batches, 2);

  Batch at_the_line({32768, 32768});  // 64 KiB: not under it
  routed.seal(at_the_line.ops);
  EXPECT_EQ(large.batches, 1);

  Batch big({65536, 65536, 65536, 17});
  routed.seal(big.ops);
  EXPECT_EQ(large.batches, 2);
  EXPECT_EQ(routed.small_batches(), 2u);
  EXPECT_EQ(routed.large_batches(), 2u);

  // Opening goes by size too, and gives back the plaintext whichever engine sealed it.
  for (auto* b : {&lone, &big}) {
    for (auto& op : b->ops) op.in = op.out;
    routed.open(b->ops);
    for (std::size_t i = 0; i < b->ops.size(); ++i) {
      EXPECT_TRUE(b->ops[i].ok);
      EXPECT_EQ(b->out[i], b->plain[i]);
    }
  }
  EXPECT_EQ(small.batches, 3);
  EXPECT_EQ(large.batches, 3);

  // Buffers are the large engine's (the GPU's pinned memory serves the cpu engine as well).
  (void)routed.allocate_io_buffer(4096);
  EXPECT_EQ(large.buffers, 1);
  EXPECT_EQ(small.buffers, 0);
}

TEST(SizeRoutedEngine, SealsLikeTheCpuEngineOnBothSidesOfTheLine) {
  Counting small("cpu"), large("gpu");
  SizeRoutedEngine routed(small, large, 8192);
  for (const auto& lens : {std::vector<std::size_t>{100, 200}, std::vector<std::size_t>{4096, 4096, 4096}}) {
    Batch a(lens), b(lens);
    b.key = a.key;
    for (std::size_t i = 0; i < lens.size(); ++i) {
      b.ops[i].nonce = a.ops[i].nonce;
      b.plain[i] = a.plain[i];
    }
    routed.seal(a.ops);
    CpuEngine(1).seal(b.ops);
    for (std::size_t i = 0; i < lens.size(); ++i) {
      EXPECT_EQ(a.out[i], b.out[i]);
      EXPECT_EQ(a.ops[i].tag, b.ops[i].tag);
    }
  }
  EXPECT_EQ(small.batches, 1);
  EXPECT_EQ(large.batches, 1);
}

TEST(SizeRoutedEngine, ALineOfZeroSendsEverythingToTheLargeEngine) {
  Counting small("cpu"), large("gpu");
  SizeRoutedEngine routed(small, large, 0);
  Batch one({1});
  routed.seal(one.ops);
  EXPECT_EQ(large.batches, 1);
  EXPECT_EQ(small.batches, 0);
}

}  // namespace
}  // namespace gcfs
