// The hybrid engine (`--engine auto` with GPUs): its split of a batch between member engines, and
// that the result is bit-identical to the cpu engine's however it was split. Written against the
// engine interface, so it runs without a GPU: the members are cpu engines and slowed-down or gated
// fakes; the device run checks the same with a real gpu engine (gpu_engine_test, HybridWithGpu).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "crypto/aes_gcm.h"
#include "crypto/cpu_engine.h"
#include "crypto/hybrid_engine.h"

namespace gcfs {
namespace {

using Bytes = std::vector<std::uint8_t>;

struct Batch {
  std::vector<ChunkKey> keys;
  std::vector<Bytes> aads, ins, outs;
  std::vector<ChunkOp> ops;
  Batch(std::uint32_t seed, const std::vector<std::size_t>& lens, std::size_t nkeys) {
    std::mt19937 rng(seed);
    keys.resize(nkeys);
    for (auto& k : keys)
      for (auto& b : k.bytes) b = static_cast<std::uint8_t>(rng());
    const std::size_t n = lens.size();
    aads.resize(n), ins.resize(n), outs.resize(n), ops.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      aads[i].resize(rng() % (kMaxChunkAadBytes + 1));
      for (auto& b : aads[i]) b = static_cast<std::uint8_t>(rng());
      ins[i].resize(lens[i]);
      for (auto& b : ins[i]) b = static_cast<std::uint8_t>(rng());
      outs[i].assign(lens[i], 0xEE);
      ChunkOp& op = ops[i];
      op.key = &keys[rng() % nkeys];
      for (auto& b : op.nonce) b = static_cast<std::uint8_t>(rng());
      op.aad = aads[i].data();
      op.aad_len = aads[i].size();
      op.in = ins[i].data();
      op.out = outs[i].data();
      op.len = lens[i];
    }
  }
  void prepare_open() {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      ins[i] = outs[i];
      outs[i].assign(ins[i].size(), 0xEE);
      ops[i].in = ins[i].data();
      ops[i].out = outs[i].data();
      ops[i].ok = false;
    }
  }
};

// A member that computes with a cpu engine, then takes as long as a slower device would: a fixed
// overhead plus a time per byte. Counts what it was given.
class SlowEngine final : public ChunkEngine {
 public:
  SlowEngine(double overhead_us, double ns_per_kib) : overhead_us_(overhead_us), ns_per_kib_(ns_per_kib) {}
  std::string name() const override { return "slow"; }
  void seal(std::span<ChunkOp> ops) override { run(ops, true); }
  void open(std::span<ChunkOp> ops) override { run(ops, false); }
  std::size_t bytes() const {
    std::lock_guard lock(mu_);
    return bytes_;
  }

 private:
  void run(std::span<ChunkOp> ops, bool seal) {
    seal ? cpu_.seal(ops) : cpu_.open(ops);
    std::size_t n = 0;
    for (const auto& op : ops) n += op.len;
    {
      std::lock_guard lock(mu_);
      bytes_ += n;
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(
        overhead_us_ + ns_per_kib_ * static_cast<double>(n) / 1024.0 / 1000.0));
  }
  CpuEngine cpu_{1};
  double overhead_us_, ns_per_kib_;
  mutable std::mutex mu_;
  std::size_t bytes_ = 0;
};

// A member that works like the cpu engine for its first `good_calls` calls and then fails as a GPU
// that fell off the bus: it scribbles over the outputs (a failed batch may leave anything there)
// and throws EngineFailure, or, with `degrade`, does the batch correctly (on its own fallback, as
// the gpu engine does) and reports degraded() from then on.
class FlakyEngine final : public ChunkEngine {
 public:
  FlakyEngine(int good_calls, bool degrade = false) : good_calls_(good_calls), degrade_(degrade) {}
  std::string name() const override { return "flaky"; }
  void seal(std::span<ChunkOp> ops) override { run(ops, true); }
  void open(std::span<ChunkOp> ops) override { run(ops, false); }
  bool degraded() const override { return degrade_ && calls_.load() > good_calls_; }
  int calls() const { return calls_.load(); }

 private:
  void run(std::span<ChunkOp> ops, bool seal) {
    if (++calls_ > good_calls_ && !degrade_) {
      for (auto& op : ops)
        if (op.len) std::memset(op.out, 0x5A, op.len);
      throw EngineFailure("fake device fell off the bus");
    }
    seal ? cpu_.seal(ops) : cpu_.open(ops);
  }
  CpuEngine cpu_{1};
  std::atomic<int> calls_{0};
  int good_calls_;
  bool degrade_;
};

// A member that holds every batch until released: keeps a backlog there for as long as a test needs.
class GatedEngine final : public ChunkEngine {
 public:
  std::string name() const override { return "gated"; }
  void seal(std::span<ChunkOp> ops) override {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    lock.unlock();
    cpu_.seal(ops);
  }
  void open(std::span<ChunkOp> ops) override { cpu_.open(ops); }
  void wait_for_caller() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return waiting_ > 0; });
  }
  void release() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  CpuEngine cpu_{1};
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

constexpr double kGBps = 1e-9;  // seconds per byte at 1 GB/s

std::vector<std::size_t> chunk_lengths(std::size_t count, std::size_t chunk) {
  std::vector<std::size_t> lens(count, chunk);
  lens.push_back(chunk / 3 + 1);  // a partial last chunk
  lens.push_back(0);              // and an empty one
  return lens;
}

void expect_same_as_cpu(const Batch& ref, const Batch& got) {
  ASSERT_EQ(ref.ops.size(), got.ops.size());
  for (std::size_t i = 0; i < ref.ops.size(); ++i) {
    EXPECT_EQ(ref.outs[i], got.outs[i]) << "chunk " << i;
    EXPECT_EQ(ref.ops[i].tag, got.ops[i].tag) << "chunk " << i;
  }
}

// The split itself: every member gets parts of large batches, and the result is the cpu engine's,
// bit for bit, sealing and opening, a tampered chunk included.
TEST(HybridEngine, SplitBatchSealsAndOpensLikeTheCpuEngine) {
  CpuEngine cpu(2), reference(1);
  SlowEngine slow(20, 100);  // about 10 GB/s
  CpuEngine third(1);
  HybridEngine::Options o;
  o.learn = false;
  o.inline_bytes = 16u << 10;
  o.min_part_bytes = 16u << 10;
  o.inline_part_bytes = 16u << 10;  // the caller takes small bites, so the feeders find work left
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 2}}, {&slow, "slow", {20e-6, kGBps / 10}},
                       {&third, "third", {1e-6, kGBps}}},
                      o);
  const auto lens = chunk_lengths(60, 16u << 10);
  // Who gets a part depends on when the feeders wake: repeat until each member has had one.
  for (int round = 0; round < 200; ++round) {
    Batch ref(11 + round, lens, 3), got(11 + round, lens, 3);
    reference.seal(ref.ops);
    hybrid.seal(got.ops);
    expect_same_as_cpu(ref, got);
    if (round == 0) {
      const std::vector<Bytes> plain = got.ins;
      got.prepare_open();
      got.ops[30].tag[0] ^= 1;  // one chunk's tag no longer matches
      hybrid.open(got.ops);
      for (std::size_t i = 0; i < got.ops.size(); ++i) {
        if (i == 30) {
          EXPECT_FALSE(got.ops[i].ok);
          EXPECT_EQ(got.outs[i], Bytes(got.outs[i].size(), 0)) << "unauthenticated plaintext released";
        } else {
          EXPECT_TRUE(got.ops[i].ok) << i;
          EXPECT_EQ(got.outs[i], plain[i]) << i;
        }
      }
    }
    bool all = true;
    for (const auto& s : hybrid.stats()) all = all && s.bytes > 0;
    if (all) break;
  }
  for (const auto& s : hybrid.stats()) EXPECT_GT(s.bytes, 0u) << s.label << " got no part: " << hybrid.describe();
}

// A batch under inline_bytes runs on member 0 in the caller's thread: no other member sees it, and
// nothing shared is counted (that is what keeps a 4 KiB request as cheap as on the cpu engine).
TEST(HybridEngine, SmallBatchesRunOnTheFirstMemberAlone) {
  CpuEngine cpu(1), reference(1);
  SlowEngine slow(1, 1);
  HybridEngine::Options o;
  o.inline_bytes = 128u << 10;
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps}}, {&slow, "fast-looking", {1e-6, kGBps / 100}}}, o);
  for (int i = 0; i < 50; ++i) {
    const auto lens = chunk_lengths(3, 4096);  // 12 KiB and a bit
    Batch ref(i, lens, 1), got(i, lens, 1);
    reference.seal(ref.ops);
    hybrid.seal(got.ops);
    expect_same_as_cpu(ref, got);
  }
  EXPECT_EQ(slow.bytes(), 0u) << "a small batch left the caller's thread";
  for (const auto& s : hybrid.stats()) EXPECT_EQ(s.parts, 0u) << s.label;
}

// A lone caller's batch up to lone_inline_bytes runs whole on member 0 (a single stream's request
// is latency; the cpu engine spreads it over its threads), while a batch above it, or one that
// comes while another caller is inside the engine, is shared as before.
TEST(HybridEngine, ALoneBatchUpToTheLimitStaysOnTheFirstMember) {
  CpuEngine cpu(2), reference(1);
  HybridEngine::Options o;
  o.learn = false;
  o.inline_bytes = 16u << 10;
  o.min_part_bytes = 16u << 10;
  o.inline_part_bytes = 16u << 10;
  o.lone_inline_bytes = 1u << 20;
  // The second member looks far faster than the cpu engine: the model would give it most of a batch.
  SlowEngine fast_looking(1, 1);
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 2}}, {&fast_looking, "fast-looking", {1e-6, kGBps / 100}}}, o);
  const auto lens = chunk_lengths(60, 16u << 10);  // about 965 KiB
  for (int round = 0; round < 20; ++round) {
    Batch ref(31 + round, lens, 2), got(31 + round, lens, 2);
    reference.seal(ref.ops);
    hybrid.seal(got.ops);
    expect_same_as_cpu(ref, got);
  }
  EXPECT_EQ(fast_looking.bytes(), 0u) << "a lone batch under the limit left member 0: " << hybrid.describe();

  // Over the limit, a lone batch is shared as before.
  const auto big = chunk_lengths(80, 16u << 10);  // 1.3 MiB
  for (int round = 0; round < 50 && fast_looking.bytes() == 0; ++round) {
    Batch ref(90 + round, big, 2), got(90 + round, big, 2);
    reference.seal(ref.ops);
    hybrid.seal(got.ops);
    expect_same_as_cpu(ref, got);
  }
  EXPECT_GT(fast_looking.bytes(), 0u) << "a batch over the limit was not shared: " << hybrid.describe();
}

// A member that seals with a cpu engine, holds its first call until released, takes `delay` over
// every later call (a slow member), and remembers the keys of every op it was given (which caller's
// batch reached it).
class RecordingEngine final : public ChunkEngine {
 public:
  RecordingEngine(bool hold_first, std::chrono::microseconds delay) : holding_(hold_first), delay_(delay) {}
  std::string name() const override { return "recording"; }
  void seal(std::span<ChunkOp> ops) override {
    {
      std::unique_lock lock(mu_);
      for (const auto& op : ops) keys_.push_back(op.key);
      if (holding_ && !held_once_) {
        held_once_ = true;
        ++waiting_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !holding_; });
      } else if (delay_.count()) {
        lock.unlock();
        std::this_thread::sleep_for(delay_);
      }
    }
    cpu_.seal(ops);
  }
  void open(std::span<ChunkOp> ops) override { cpu_.open(ops); }
  void wait_for_held_call() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return waiting_ > 0; });
  }
  void release() {
    std::lock_guard lock(mu_);
    holding_ = false;
    cv_.notify_all();
  }
  bool saw_any_of(const std::vector<ChunkKey>& keys) const {
    std::lock_guard lock(mu_);
    for (const ChunkKey* k : keys_)
      for (const auto& mine : keys)
        if (k == &mine) return true;
    return false;
  }

 private:
  CpuEngine cpu_{1};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<const ChunkKey*> keys_;
  bool holding_, held_once_ = false;
  std::chrono::microseconds delay_;
  int waiting_ = 0;
};

// With as many callers as inline slots (the callers' own work keeps member 0's cores busy), a caller
// that finds a slot free seals its batch whole on member 0: a part handed to a fed member would
// only add that member's round trip to its wait (16 callers x 1 MiB on the H100 machine).
TEST(HybridEngine, ACallerBesideEnoughOthersKeepsItsBatchWhole) {
  for (const bool whole : {true, false}) {
    SCOPED_TRACE(whole ? "saturated_callers_whole" : "shared as before");
    CpuEngine reference(1);
    // Member 0 takes 3 ms a call: time enough for the fed member's feeder to come for its share.
    RecordingEngine first(true, std::chrono::milliseconds(3)), fast_looking(false, std::chrono::microseconds(0));
    HybridEngine::Options o;
    o.learn = false;
    o.inline_bytes = 16u << 10;
    o.min_part_bytes = 16u << 10;
    o.inline_part_bytes = 16u << 10;
    o.inline_slots = 2;
    o.feeders = 1;
    o.saturated_callers_whole = whole;
    // The fed member looks far faster than member 0: the model would give it most of a batch.
    HybridEngine hybrid({{&first, "cpu", {2e-6, kGBps / 2}}, {&fast_looking, "fast-looking", {1e-6, kGBps / 100}}}, o);
    const auto lens = chunk_lengths(40, 16u << 10);
    // Caller A comes alone and is held in its first part on member 0, holding one slot.
    Batch ref_a(61, lens, 1), a(61, lens, 1), ref_b(62, lens, 1), b(62, lens, 1);
    std::thread caller_a([&] { hybrid.seal(a.ops); });
    first.wait_for_held_call();
    // Caller B finds the other slot free, with as many callers in the engine as slots.
    hybrid.seal(b.ops);
    if (whole) EXPECT_FALSE(fast_looking.saw_any_of(b.keys)) << "B's batch was shared: " << hybrid.describe();
    else EXPECT_TRUE(fast_looking.saw_any_of(b.keys)) << "B's batch was not shared: " << hybrid.describe();
    first.release();
    caller_a.join();
    reference.seal(ref_a.ops);
    reference.seal(ref_b.ops);
    expect_same_as_cpu(ref_a, a);
    expect_same_as_cpu(ref_b, b);
  }
}

// route_whole_max_bytes: a batch in the range goes whole to the member the model says finishes it
// first (a fed member called in the caller's thread), sealing and opening like the cpu engine.
TEST(HybridEngine, AWholeBatchGoesToTheMemberThatFinishesItFirst) {
  for (const bool fed_looks_fast : {true, false}) {
    SCOPED_TRACE(fed_looks_fast ? "fed member looks fast" : "fed member looks slow");
    CpuEngine cpu(2), reference(1);
    RecordingEngine fed(false, std::chrono::microseconds(0));
    HybridEngine::Options o;
    o.learn = false;
    o.inline_bytes = 16u << 10;
    o.route_whole_max_bytes = 4u << 20;
    const double fed_cost = fed_looks_fast ? kGBps / 100 : kGBps * 100;
    HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps}}, {&fed, "fed", {1e-6, fed_cost}}}, o);
    const auto lens = chunk_lengths(40, 16u << 10);
    Batch ref(71, lens, 1), got(71, lens, 1);
    reference.seal(ref.ops);
    hybrid.seal(got.ops);
    expect_same_as_cpu(ref, got);
    const auto plain = got.ins;
    got.prepare_open();
    hybrid.open(got.ops);
    for (std::size_t i = 0; i < lens.size(); ++i) {
      EXPECT_TRUE(got.ops[i].ok) << "chunk " << i;
      EXPECT_EQ(got.outs[i], plain[i]) << "chunk " << i;
    }
    std::size_t total = 0;
    for (auto len : lens) total += len;
    const auto st = hybrid.stats();
    EXPECT_EQ(fed.saw_any_of(got.keys), fed_looks_fast) << hybrid.describe();
    EXPECT_EQ(st[fed_looks_fast ? 1 : 0].bytes, 2 * total) << hybrid.describe();
    EXPECT_EQ(st[fed_looks_fast ? 0 : 1].bytes, 0u) << hybrid.describe();
  }
}

// A member with work at hand finishes a new batch later: the model sends the batch elsewhere.
TEST(HybridEngine, AWholeBatchSkipsAMemberBusyWithAnother) {
  CpuEngine cpu(2), reference(1);
  GatedEngine gated;
  HybridEngine::Options o;
  o.learn = false;
  o.inline_bytes = 16u << 10;
  o.route_whole_max_bytes = 4u << 20;
  // Alone, the fed member finishes a batch in 0.6 of member 0's time; behind one batch, in 1.2.
  HybridEngine hybrid({{&cpu, "cpu", {1e-6, kGBps}}, {&gated, "gated", {1e-6, 0.6 * kGBps}}}, o);
  const auto lens = chunk_lengths(60, 16u << 10);
  Batch ref_a(81, lens, 1), a(81, lens, 1), ref_b(82, lens, 1), b(82, lens, 1);
  std::thread caller_a([&] { hybrid.seal(a.ops); });
  gated.wait_for_caller();  // A's batch is held on the fed member
  hybrid.seal(b.ops);       // returns while A's is still held: B's went to member 0
  std::size_t total = 0;
  for (auto len : lens) total += len;
  EXPECT_EQ(hybrid.stats()[0].bytes, total) << hybrid.describe();
  gated.release();
  caller_a.join();
  EXPECT_EQ(hybrid.stats()[1].bytes, total) << hybrid.describe();
  reference.seal(ref_a.ops);
  reference.seal(ref_b.ops);
  expect_same_as_cpu(ref_a, a);
  expect_same_as_cpu(ref_b, b);
}

// A fed member whose estimate keeps it out of the routing (learned under a load that has gone) is
// given a batch again after probe_after, and learns its real rate from it.
TEST(HybridEngine, ARoutedMemberLeftIdleIsTriedAgain) {
  CpuEngine cpu(2), reference(1);
  RecordingEngine fed(false, std::chrono::microseconds(0));
  HybridEngine::Options o;
  o.inline_bytes = 16u << 10;
  o.route_whole_max_bytes = 4u << 20;
  o.probe_after = std::chrono::milliseconds(200);
  // The fed member starts out looking 1000 times slower than member 0 (1 MB/s).
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps}}, {&fed, "fed", {1e-6, kGBps * 1000}}}, o);
  const double start_cost = hybrid.stats()[1].cost.seconds_per_byte;
  const auto lens = chunk_lengths(40, 16u << 10);
  Batch first(101, lens, 1);
  hybrid.seal(first.ops);
  EXPECT_FALSE(fed.saw_any_of(first.keys)) << hybrid.describe();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Batch ref(102, lens, 1), probe(102, lens, 1);
  reference.seal(ref.ops);
  hybrid.seal(probe.ops);
  expect_same_as_cpu(ref, probe);
  EXPECT_TRUE(fed.saw_any_of(probe.keys)) << "no probe after 300 ms: " << hybrid.describe();
  EXPECT_LT(hybrid.stats()[1].cost.seconds_per_byte, start_cost) << hybrid.describe();
  // Right after the probe, the model decides again.
  Batch next(103, lens, 1);
  hybrid.seal(next.ops);
  EXPECT_FALSE(fed.saw_any_of(next.keys)) << hybrid.describe();
}

// A fed member that fails on a whole batch is retired; member 0 redoes the batch, and takes the
// next ones.
TEST(HybridEngine, AWholeBatchOnAFailingMemberIsRedoneOnTheFirst) {
  CpuEngine cpu(2), reference(1);
  FlakyEngine flaky(0);
  std::vector<std::string> log;
  HybridEngine::Options o;
  o.learn = false;
  o.inline_bytes = 16u << 10;
  o.route_whole_max_bytes = 4u << 20;
  o.log = [&](const std::string& m) { log.push_back(m); };
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps}}, {&flaky, "gpu1", {1e-6, kGBps / 100}}}, o);
  const auto lens = chunk_lengths(30, 16u << 10);
  for (int round = 0; round < 3; ++round) {
    Batch ref(91 + round, lens, 1), got(91 + round, lens, 1);
    reference.seal(ref.ops);
    hybrid.seal(got.ops);
    expect_same_as_cpu(ref, got);
  }
  EXPECT_EQ(flaky.calls(), 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("gpu1 failed (fake device fell off the bus)"), std::string::npos) << log[0];
  EXPECT_TRUE(hybrid.stats()[1].retired);
  EXPECT_EQ(hybrid.stats()[1].bytes, 0u) << hybrid.describe();
}

// seal_in_parts: a lone batch under the limit is sealed in parts by member 0 (every part handed
// over once, in order, as the cpu engine seals it); over the limit it is sealed whole, then handed
// over in one call.
TEST(HybridEngine, SealInPartsGoesToTheFirstMemberForALoneBatch) {
  CpuEngine cpu(2), reference(1);
  SlowEngine fast_looking(1, 1);
  HybridEngine::Options o;
  o.learn = false;
  o.inline_bytes = 16u << 10;
  o.min_part_bytes = 16u << 10;
  o.lone_inline_bytes = 1u << 20;
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 2}}, {&fast_looking, "fast-looking", {1e-6, kGBps / 100}}}, o);
  for (std::size_t chunks : {std::size_t{48}, std::size_t{96}}) {  // 768 KiB, then 1.5 MiB
    const std::vector<std::size_t> lens(chunks, 16u << 10);
    Batch ref(7 + chunks, lens, 1), got(7 + chunks, lens, 1);
    reference.seal(ref.ops);
    std::vector<std::size_t> ends;
    for (std::size_t e = 8; e <= chunks; e += 8) ends.push_back(e);
    std::size_t next = 0, calls = 0;
    hybrid.seal_in_parts(got.ops, ends, [&](std::size_t a, std::size_t b) {
      EXPECT_EQ(a, next);
      EXPECT_GT(b, a);
      next = b, ++calls;
      return true;
    });
    EXPECT_EQ(next, ends.size());
    expect_same_as_cpu(ref, got);
    if (chunks == 48) {
      EXPECT_EQ(fast_looking.bytes(), 0u) << "a lone batch under the limit left member 0";
    } else {
      EXPECT_EQ(calls, 1u) << "a shared batch is handed over whole";
    }
  }
}

// A batch under lone_inline_bytes that comes while another caller is inside the engine is shared.
TEST(HybridEngine, ABatchBesideAnotherCallerIsShared) {
  CpuEngine cpu(2), reference(1);
  GatedEngine gated;  // holds what it takes until released: the first caller stays inside
  HybridEngine::Options o;
  o.learn = false;
  o.inline_bytes = 16u << 10;
  o.min_part_bytes = 16u << 10;
  o.inline_part_bytes = 16u << 10;
  o.inline_slots = 0;  // the fed member takes every part, so each batch reaches it
  o.lone_inline_bytes = 1u << 20;
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 2}}, {&gated, "gated", {1e-6, kGBps / 100}}}, o);
  const auto big = chunk_lengths(80, 16u << 10), small = chunk_lengths(20, 16u << 10);
  Batch ref_big(90, big, 2), got_big(90, big, 2), ref_small(91, small, 2), got_small(91, small, 2);
  reference.seal(ref_big.ops);
  reference.seal(ref_small.ops);
  std::thread first([&] { hybrid.seal(got_big.ops); });
  gated.wait_for_caller();
  std::atomic<bool> second_done{false};
  std::thread second([&] {
    hybrid.seal(got_small.ops);
    second_done = true;
  });
  // Not alone: its batch is queued for the gated member, so it cannot end before the release.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(second_done.load()) << "a batch beside another caller ran inline";
  gated.release();
  first.join();
  second.join();
  expect_same_as_cpu(ref_big, got_big);
  expect_same_as_cpu(ref_small, got_small);
}

// The model's split: a small batch stays whole on the member that finishes it first (the one with
// the small overhead); a large one is shared so that every part is predicted to end together.
TEST(HybridEngine, SmallBatchesStayWholeLargeOnesFinishTogether) {
  CpuEngine a(1), b(1);
  HybridEngine::Options o;
  o.learn = false;
  const EngineCost cpu_cost{2e-6, kGBps / 10}, gpu_cost{30e-6, kGBps / 40};
  HybridEngine hybrid({{&a, "cpu", cpu_cost}, {&b, "gpu", gpu_cost}}, o);
  auto small = hybrid.plan(64u << 10);
  EXPECT_EQ(small[0], 64u << 10) << "a lone 64 KiB batch belongs on the cpu engine";
  EXPECT_EQ(small[1], 0u);

  const std::size_t big = 64u << 20;
  auto split = hybrid.plan(big);
  EXPECT_EQ(split[0] + split[1], big);
  const double t0 = cpu_cost.overhead_s + static_cast<double>(split[0]) * cpu_cost.seconds_per_byte;
  const double t1 = gpu_cost.overhead_s + static_cast<double>(split[1]) * gpu_cost.seconds_per_byte;
  EXPECT_NEAR(t0, t1, 1e-6) << "parts should be predicted to finish together";
  EXPECT_GT(split[1], 3 * split[0]) << "the faster member takes the larger share";
  // The sum is faster than either alone.
  const double alone = std::min(cpu_cost.overhead_s + big * cpu_cost.seconds_per_byte,
                                gpu_cost.overhead_s + big * gpu_cost.seconds_per_byte);
  EXPECT_LT(std::max(t0, t1), 0.85 * alone);
}

// Under load a member's queue counts: while a fed member holds a large part, the model gives new
// work to the other, and gives it back once that part is done. With no inline slot the caller
// leaves its whole batch to the fed member.
TEST(HybridEngine, BusyMemberGetsLessUntilItsBacklogClears) {
  GatedEngine gated;
  CpuEngine cpu(1);
  HybridEngine::Options o;
  o.learn = false;
  o.inline_slots = 0;
  o.max_part_bytes = 32u << 20;  // the held batch goes to the gated member in one part
  // The gated member looks ten times faster, so it would take most of anything.
  HybridEngine hybrid({{&cpu, "cpu", {1e-6, kGBps / 2}}, {&gated, "fast", {1e-6, kGBps / 20}}}, o);
  EXPECT_GT(hybrid.plan(256u << 10)[1], 200u << 10);

  Batch held(5, std::vector<std::size_t>(256, 64u << 10), 1);  // 16 MiB, all of it to the fast one
  std::thread caller([&] { hybrid.seal(held.ops); });
  gated.wait_for_caller();
  const auto during = hybrid.plan(256u << 10);
  EXPECT_EQ(during[1], 0u) << "a member with 16 MiB at work still took new work";
  EXPECT_EQ(during[0], 256u << 10);
  gated.release();
  caller.join();
  EXPECT_GT(hybrid.plan(256u << 10)[1], 200u << 10);
  EXPECT_EQ(hybrid.stats()[1].bytes, 16u << 20);

  Batch ref(5, std::vector<std::size_t>(256, 64u << 10), 1);
  CpuEngine(1).seal(ref.ops);
  expect_same_as_cpu(ref, held);
}

// The estimates follow real parts: a member that starts out credited with 100 GB/s but does about
// 0.5 GB/s is found out within a few batches and then given little; without learning it would
// keep the largest share.
TEST(HybridEngine, LearnsAMemberSlowerThanItsStartingEstimate) {
  for (bool learn : {false, true}) {
    SCOPED_TRACE(learn ? "learning" : "fixed estimates");
    SlowEngine slow(10, 2000);  // 2 us per KiB: about 0.5 GB/s
    CpuEngine cpu(1);
    HybridEngine::Options o;
    o.learn = learn;
    HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 1}}, {&slow, "slow", {10e-6, kGBps / 100}}}, o);
    const std::size_t batch = 4u << 20;
    const std::size_t before = hybrid.plan(batch)[1];
    EXPECT_GT(before, batch / 2) << "the starting estimate favours the slow member";
    Batch b(9, std::vector<std::size_t>(64, 64u << 10), 2);
    // Twelve parts done by the slow member, however many batches that takes: on a loaded machine
    // its thread may not be scheduled before the caller has taken a batch's every part itself.
    for (int i = 0; i < 12 || (i < 400 && hybrid.stats()[1].parts < 12); ++i) hybrid.seal(b.ops);
    const auto after = hybrid.plan(batch);
    if (learn) {
      // Its estimate falls from 100 GB/s to near what it does; its share falls with it (how far
      // depends on what the cpu member reaches on this machine, so only clearly, not to a figure).
      EXPECT_LT(1e-9 / hybrid.stats()[1].cost.seconds_per_byte, 5.0) << hybrid.describe();
      EXPECT_LT(after[1], before * 85 / 100) << hybrid.describe();
    } else {
      EXPECT_GT(after[1], batch / 2) << hybrid.describe();
    }
  }
}

// A part's time includes whatever its caller waited for besides the member (on a busy machine, a
// core). One part that took four hundred times the member's real time moves its estimate by at
// most 1.5x (8^0.2): averaged as plain seconds per byte, it took the estimate from 10 GB/s to about
// 25 MB/s, and the member then got too little work to learn its rate back.
TEST(HybridEngine, OneSlowPartDoesNotUndoAMembersRate) {
  class SlowOnce final : public ChunkEngine {
   public:
    std::string name() const override { return "slow-once"; }
    void seal(std::span<ChunkOp> ops) override {
      cpu_.seal(ops);
      if (!slept_.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    void open(std::span<ChunkOp> ops) override { cpu_.open(ops); }

   private:
    CpuEngine cpu_{1};
    std::atomic<bool> slept_{false};
  };
  CpuEngine cpu(1);
  SlowOnce fed;
  HybridEngine::Options o;
  o.inline_slots = 0;  // every batch to the fed member while it is there
  o.inline_bytes = 0;
  o.route_whole_max_bytes = 4u << 20;
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps}}, {&fed, "fed", {10e-6, kGBps / 10}}}, o);
  const double start = hybrid.stats()[1].cost.seconds_per_byte;
  Batch b(11, std::vector<std::size_t>(16, 64u << 10), 1);  // 1 MiB: a sample of the rate
  hybrid.seal(b.ops);
  const double after = hybrid.stats()[1].cost.seconds_per_byte;
  EXPECT_EQ(hybrid.stats()[1].parts, 1u) << hybrid.describe();
  EXPECT_GT(after, start) << "the slow part taught the model nothing: " << hybrid.describe();
  EXPECT_LT(after, 2 * start) << "one slow part undid the member's rate: " << hybrid.describe();
}

// Many callers at once, batches of every size, three members: every result is the cpu engine's.
TEST(HybridEngine, ConcurrentCallersGetCpuIdenticalResults) {
  // Batches up to 160 KiB routed whole (the rest shared), or every one shared.
 for (const std::size_t route_whole : {std::size_t{160} << 10, std::size_t{0}}) {
  SCOPED_TRACE("route_whole_max_bytes " + std::to_string(route_whole));
  CpuEngine cpu(2), other(1), reference(1);
  SlowEngine slow(5, 50);
  HybridEngine::Options o;
  o.inline_bytes = 8u << 10;
  o.min_part_bytes = 8u << 10;
  o.inline_part_bytes = 32u << 10;
  o.route_whole_max_bytes = route_whole;
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 2}}, {&slow, "slow", {5e-6, kGBps / 20}},
                       {&other, "other", {1e-6, kGBps}}},
                      o);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 10; ++r) {
        const std::size_t n = 1 + (t * 7 + r * 13) % 40;
        const auto lens = chunk_lengths(n, 8u << 10);
        Batch ref(100 * t + r, lens, 2), got(100 * t + r, lens, 2);
        reference.seal(ref.ops);
        hybrid.seal(got.ops);
        for (std::size_t i = 0; i < lens.size(); ++i)
          if (ref.outs[i] != got.outs[i] || ref.ops[i].tag != got.ops[i].tag) ++mismatches;
        const auto plain = got.ins;
        got.prepare_open();
        hybrid.open(got.ops);
        for (std::size_t i = 0; i < lens.size(); ++i)
          if (!got.ops[i].ok || got.outs[i] != plain[i]) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  std::size_t members_used = 0;
  for (const auto& s : hybrid.stats()) members_used += s.bytes > 0;
  EXPECT_GE(members_used, 2u) << hybrid.describe();
 }
}

// Seals and opens `rounds` batches on each of `callers` threads at once and counts every chunk that
// differs from the cpu engine's result (or fails to open back to its plaintext).
int mismatches_under_load(ChunkEngine& engine, int callers, int rounds, std::uint32_t seed) {
  CpuEngine reference(1);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        const auto lens = chunk_lengths(4 + (t * 5 + r * 3) % 24, 8u << 10);
        Batch ref(seed + 100 * t + r, lens, 2), got(seed + 100 * t + r, lens, 2);
        reference.seal(ref.ops);
        engine.seal(got.ops);
        for (std::size_t i = 0; i < lens.size(); ++i)
          if (ref.outs[i] != got.outs[i] || ref.ops[i].tag != got.ops[i].tag) ++bad;
        const auto plain = got.ins;
        got.prepare_open();
        engine.open(got.ops);
        for (std::size_t i = 0; i < lens.size(); ++i)
          if (!got.ops[i].ok || got.outs[i] != plain[i]) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  return bad.load();
}

// A member whose device fails mid-run (EngineFailure, its outputs scribbled over) is retired: the
// part it failed is redone, the log says so once, it is never called again, the member beside it
// keeps working, and every result stays bit-identical to the cpu engine's.
TEST(HybridEngine, AFailingMemberIsRetiredAndItsWorkGoesToTheOthers) {
  CpuEngine cpu(2);
  FlakyEngine flaky(3);
  SlowEngine other(5, 100);
  std::vector<std::string> log;
  std::mutex log_mu;
  HybridEngine::Options o;
  o.inline_bytes = 8u << 10;
  o.min_part_bytes = 8u << 10;
  o.inline_slots = 0;  // the fed members do everything while any is left
  o.log = [&](const std::string& m) {
    std::lock_guard lock(log_mu);
    log.push_back(m);
  };
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 2}}, {&flaky, "gpu1", {5e-6, kGBps / 40}},
                       {&other, "gpu2", {5e-6, kGBps / 10}}},
                      o);
  EXPECT_EQ(mismatches_under_load(hybrid, 4, 12, 1000), 0);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("gpu1 failed (fake device fell off the bus)"), std::string::npos) << log[0];
  const auto st = hybrid.stats();
  EXPECT_TRUE(st[1].retired) << hybrid.describe();
  EXPECT_FALSE(st[2].retired) << hybrid.describe();
  EXPECT_LE(flaky.calls(), 3 + o.feeders) << "only the calls already under way when it failed";

  // Afterwards the failed member gets nothing; the other one still gets work.
  const int calls = flaky.calls();
  const std::size_t other_before = other.bytes();
  EXPECT_EQ(mismatches_under_load(hybrid, 2, 6, 2000), 0);
  EXPECT_EQ(flaky.calls(), calls);
  EXPECT_GT(other.bytes(), other_before);
  EXPECT_EQ(hybrid.plan(64u << 20)[1], 0u);
  EXPECT_EQ(log.size(), 1u);
}

// A member that does its batches on a fallback after losing its device (degraded(), as the gpu
// engine reports) is retired the same way, with its results kept (they are right).
TEST(HybridEngine, ADegradedMemberIsRetired) {
  CpuEngine cpu(2);
  FlakyEngine flaky(2, /*degrade=*/true);
  std::vector<std::string> log;
  HybridEngine::Options o;
  o.inline_bytes = 8u << 10;
  o.min_part_bytes = 8u << 10;
  o.inline_slots = 0;
  o.feeders = 1;
  o.log = [&](const std::string& m) { log.push_back(m); };  // one feeder: no lock needed
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 2}}, {&flaky, "gpu0", {5e-6, kGBps / 40}}}, o);
  EXPECT_EQ(mismatches_under_load(hybrid, 3, 8, 3000), 0);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("gpu0 lost its device"), std::string::npos) << log[0];
  EXPECT_TRUE(hybrid.stats()[1].retired);
  EXPECT_EQ(flaky.calls(), 3) << "called again after it said it was degraded";
  // What comes after the retirement is member 0's, and its share in the stats says so.
  const std::size_t before = hybrid.stats()[0].bytes;
  EXPECT_EQ(mismatches_under_load(hybrid, 2, 4, 3000), 0);
  EXPECT_GT(hybrid.stats()[0].bytes, before) << hybrid.describe();
}

// When every fed member has failed, callers that were waiting for an inline slot (there are none
// here) do the work themselves: nothing hangs, nothing is lost.
TEST(HybridEngine, WhenEveryFedMemberFailsTheCallersCarryOn) {
  CpuEngine cpu(1);
  FlakyEngine flaky(0);
  HybridEngine::Options o;
  o.inline_bytes = 8u << 10;
  o.min_part_bytes = 8u << 10;
  o.inline_slots = 0;
  o.log = [](const std::string&) {};
  HybridEngine hybrid({{&cpu, "cpu", {2e-6, kGBps / 2}}, {&flaky, "gpu0", {5e-6, kGBps / 40}}}, o);
  EXPECT_EQ(mismatches_under_load(hybrid, 4, 6, 4000), 0);
  EXPECT_TRUE(hybrid.stats()[1].retired);
  EXPECT_GT(hybrid.stats()[0].bytes, 0u);
}

}  // namespace
}  // namespace gcfs
