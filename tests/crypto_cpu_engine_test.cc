// The cpu engine and its thread pool: batches of unrelated chunks must come out exactly as the
// one-shot reference (gcm_seal) computes them, whatever the batch mix and however many threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "crypto/aes_gcm.h"
#include "crypto/cpu_engine.h"
#include "crypto/thread_pool.h"

namespace gcfs {
namespace {

using Bytes = std::vector<std::uint8_t>;

// A batch of ops with their own buffers, built from a seed so two engines can be fed the same one.
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
    aads.resize(n);
    ins.resize(n);
    outs.resize(n);
    ops.resize(n);
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
  // Turns the sealed batch into an open batch of the ciphertexts, in place.
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

std::vector<std::size_t> mixed_lengths() {
  std::vector<std::size_t> lens;
  for (int rep = 0; rep < 3; ++rep)
    for (std::size_t l : {0, 1, 15, 16, 17, 31, 32, 33, 4095, 4096, 4097, 65536}) lens.push_back(l);
  return lens;
}

void expect_matches_reference(const Batch& b) {
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    SCOPED_TRACE("op " + std::to_string(i) + " len " + std::to_string(b.ops[i].len));
    const ChunkOp& op = b.ops[i];
    Bytes ref(op.len);
    auto tag = gcm_seal(op.key->bytes, op.nonce, b.aads[i], b.ins[i], ref.data());
    EXPECT_EQ(b.outs[i], ref);
    EXPECT_EQ(op.tag, tag);
  }
}

TEST(CpuEngine, MixedBatchMatchesOneShotReference) {
  for (std::size_t threads : {1, 2, 8}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    CpuEngine engine(threads, 0);
    Batch b(42, mixed_lengths(), 5);
    engine.seal(b.ops);
    expect_matches_reference(b);
    const std::vector<Bytes> plain = b.ins;
    b.prepare_open();
    engine.open(b.ops);
    for (std::size_t i = 0; i < b.ops.size(); ++i) {
      EXPECT_TRUE(b.ops[i].ok) << i;
      EXPECT_EQ(b.outs[i], plain[i]) << i;
    }
  }
}

// The engine keeps each thread's key schedule while chunks share a key: a key that differs from
// the last one in its final byte only, at the same address or another, must still be used as
// itself, for sealing and for opening.
TEST(CpuEngine, KeysDifferingInTheLastByteAreNotTakenForTheKeptOne) {
  CpuEngine engine(1, 0);
  Batch b(7, {4096, 4096, 4096, 4096}, 1);
  ChunkKey other = b.keys[0];
  other.bytes[kChunkKeyBytes - 1] ^= 1;
  b.ops[1].key = &other;
  b.ops[3].key = &other;
  engine.seal(b.ops);
  expect_matches_reference(b);
  EXPECT_NE(b.outs[1], Bytes(4096, 0xEE));
  // The same address holding new bytes between calls.
  ChunkKey moving = b.keys[0];
  Batch c(8, {4096}, 1);
  c.ops[0].key = &moving;
  engine.seal(c.ops);
  expect_matches_reference(c);
  moving.bytes[kChunkKeyBytes - 1] ^= 0x80;
  c.outs[0].assign(4096, 0xEE);
  engine.seal(c.ops);
  expect_matches_reference(c);
  // Opening under the wrong (last-byte) key fails; under the right one it succeeds.
  const Bytes plain = c.ins[0];
  c.prepare_open();
  engine.open(c.ops);
  EXPECT_TRUE(c.ops[0].ok);
  EXPECT_EQ(c.outs[0], plain);
  moving.bytes[kChunkKeyBytes - 1] ^= 0x80;
  c.ops[0].ok = false;
  engine.open(c.ops);
  EXPECT_FALSE(c.ops[0].ok);
}

TEST(CpuEngine, ThreadCountDoesNotChangeResults) {
  const auto lens = mixed_lengths();
  CpuEngine single(1);
  Batch a(7, lens, 3);
  single.seal(a.ops);
  for (std::size_t threads : {2, 3, 16}) {
    CpuEngine multi(threads, 0);
    EXPECT_EQ(multi.threads(), threads);
    Batch b(7, lens, 3);
    multi.seal(b.ops);
    for (std::size_t i = 0; i < lens.size(); ++i) {
      EXPECT_EQ(a.outs[i], b.outs[i]) << i;
      EXPECT_EQ(a.ops[i].tag, b.ops[i].tag) << i;
    }
  }
  CpuEngine all_cores;  // threads = 0: one per core
  EXPECT_GE(all_cores.threads(), 1u);
  EXPECT_EQ(all_cores.name(), "cpu");
}

TEST(CpuEngine, FailedOpenZeroesOnlyThatOp) {
  for (std::size_t threads : {1, 4}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    CpuEngine engine(threads, 0);
    Batch b(9, mixed_lengths(), 4);
    engine.seal(b.ops);
    const std::vector<Bytes> plain = b.ins;
    b.prepare_open();
    // Damage every third op in a different place: ciphertext, tag, nonce, AAD, key.
    std::vector<bool> damaged(b.ops.size(), false);
    ChunkKey wrong_key;
    wrong_key.bytes.fill(0x42);
    for (std::size_t i = 0; i < b.ops.size(); i += 3) {
      ChunkOp& op = b.ops[i];
      switch ((i / 3) % 5) {
        case 0:
          if (op.len) b.ins[i][op.len / 2] ^= 1;
          else op.tag[0] ^= 1;
          break;
        case 1: op.tag[15] ^= 0x80; break;
        case 2: op.nonce[11] ^= 1; break;
        case 3:
          if (op.aad_len) b.aads[i][0] ^= 1;
          else op.tag[3] ^= 1;
          break;
        case 4: op.key = &wrong_key; break;
      }
      damaged[i] = true;
    }
    engine.open(b.ops);
    for (std::size_t i = 0; i < b.ops.size(); ++i) {
      if (damaged[i]) {
        EXPECT_FALSE(b.ops[i].ok) << i;
        // Never unauthenticated plaintext, even partially.
        EXPECT_EQ(b.outs[i], Bytes(b.ops[i].len, 0)) << i;
      } else {
        EXPECT_TRUE(b.ops[i].ok) << i;
        EXPECT_EQ(b.outs[i], plain[i]) << i;
      }
    }
  }
}

TEST(CpuEngine, SealInPlace) {
  CpuEngine engine(2, 0);
  Batch b(11, {0, 1, 100, 4096}, 1);
  Batch ref(11, {0, 1, 100, 4096}, 1);
  engine.seal(ref.ops);
  for (std::size_t i = 0; i < b.ops.size(); ++i) b.ops[i].out = b.ins[i].data();
  engine.seal(b.ops);
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    EXPECT_EQ(b.ins[i], ref.outs[i]) << i;
    EXPECT_EQ(b.ops[i].tag, ref.ops[i].tag) << i;
  }
}

TEST(CpuEngine, EmptyBatchAndBadOps) {
  CpuEngine engine(2);
  std::vector<ChunkOp> none;
  engine.seal(none);
  engine.open(none);
  ChunkOp op;  // no key
  std::vector<ChunkOp> one{op};
  EXPECT_THROW(engine.seal(one), std::invalid_argument);
  ChunkKey k;
  Bytes aad(kMaxChunkAadBytes + 1);
  one[0].key = &k;
  one[0].aad = aad.data();
  one[0].aad_len = aad.size();
  EXPECT_THROW(engine.seal(one), std::invalid_argument);
}

// An open whose AAD is longer than anything sealing accepts cannot be authentic: that op fails and
// is zeroed like a tampered one, and the rest of its batch opens (no exception for the batch).
TEST(CpuEngine, OpenWithOverlongAadFailsOnlyThatOp) {
  for (std::size_t threads : {1, 4}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    CpuEngine engine(threads, 0);
    Batch b(13, {4096, 4096, 33, 4096}, 2);
    engine.seal(b.ops);
    const std::vector<Bytes> plain = b.ins;
    b.prepare_open();
    Bytes longer(kMaxChunkAadBytes + 1, 0);
    std::copy(b.aads[2].begin(), b.aads[2].end(), longer.begin());
    b.ops[2].aad = longer.data();
    b.ops[2].aad_len = longer.size();
    ASSERT_NO_THROW(engine.open(b.ops));
    for (std::size_t i = 0; i < b.ops.size(); ++i) {
      if (i == 2) {
        EXPECT_FALSE(b.ops[i].ok);
        EXPECT_EQ(b.outs[i], Bytes(b.ops[i].len, 0));
      } else {
        EXPECT_TRUE(b.ops[i].ok) << i;
        EXPECT_EQ(b.outs[i], plain[i]) << i;
      }
    }
  }
}

TEST(CpuEngine, ConcurrentCallersShareOneEngine) {
  // FUSE workers call one engine at once; each gets its own batch's results.
  CpuEngine engine(4, 0);
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 6; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        Batch b(static_cast<std::uint32_t>(1000 * t + round), {0, 17, 4096, 65536, 3}, 2);
        engine.seal(b.ops);
        for (std::size_t i = 0; i < b.ops.size(); ++i) {
          Bytes ref(b.ops[i].len);
          auto tag = gcm_seal(b.ops[i].key->bytes, b.ops[i].nonce, b.aads[i], b.ins[i], ref.data());
          if (ref != b.outs[i] || tag != b.ops[i].tag) ++bad;
        }
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
}

// ------------------------------------------------------------------------- seal_in_parts

// Ends of parts of `per` ops each (the last may be shorter) over n ops.
std::vector<std::size_t> part_ends(std::size_t n, std::size_t per) {
  std::vector<std::size_t> ends;
  for (std::size_t e = per; e < n + per; e += per) ends.push_back(std::min(e, n));
  return ends;
}

std::vector<std::size_t> stream_lengths() {
  std::vector<std::size_t> lens(61, 4096);  // a 4 KiB-chunk write of 244 KiB ...
  lens.push_back(1);                         // ... ending in a short chunk
  lens[7] = 0;
  return lens;
}

// After a seal_in_parts that stopped early or failed, the engine seals the next batch as one
// thread of a fresh engine does.
void expect_next_batch_right(CpuEngine& engine, std::uint32_t seed, const std::vector<std::size_t>& lens) {
  Batch again(seed, lens, 1), ref(seed, lens, 1);
  CpuEngine(1).seal(ref.ops);
  engine.seal(again.ops);
  EXPECT_EQ(again.outs, ref.outs);
}

TEST(CpuEngine, SealInPartsMatchesSealAndHandsEveryPartOverOnceInOrder) {
  const auto lens = stream_lengths();
  Batch ref(11, lens, 2);
  CpuEngine(1).seal(ref.ops);
  const auto ends = part_ends(lens.size(), 5);
  for (std::size_t threads : {1, 2, 4}) {
    for (std::size_t min_bytes : {std::size_t{0}, std::size_t{1} << 30}) {  // streamed, and sealed whole
      SCOPED_TRACE("threads " + std::to_string(threads) + " parallel_min_bytes " + std::to_string(min_bytes));
      CpuEngine engine(threads, min_bytes);
      Batch b(11, lens, 2);
      std::vector<std::pair<std::size_t, std::size_t>> runs;
      bool sealed_when_handed = true;
      engine.seal_in_parts(b.ops, ends, [&](std::size_t a, std::size_t e) {
        runs.emplace_back(a, e);
        // Every op of the parts handed over is final already.
        for (std::size_t i = a == 0 ? 0 : ends[a - 1]; i < ends[e - 1]; ++i)
          if (b.outs[i] != ref.outs[i] || b.ops[i].tag != ref.ops[i].tag) sealed_when_handed = false;
        return true;
      });
      EXPECT_TRUE(sealed_when_handed);
      ASSERT_FALSE(runs.empty());
      std::size_t next = 0;
      for (const auto& [a, e] : runs) {
        EXPECT_EQ(a, next);
        EXPECT_LT(a, e);
        next = e;
      }
      EXPECT_EQ(next, ends.size());
      for (std::size_t i = 0; i < lens.size(); ++i) {
        EXPECT_EQ(b.outs[i], ref.outs[i]) << i;
        EXPECT_EQ(b.ops[i].tag, ref.ops[i].tag) << i;
      }
    }
  }
}

TEST(CpuEngine, SealInPartsStopsHandingOverWhenTheWriterSaysSo) {
  const auto lens = stream_lengths();
  const auto ends = part_ends(lens.size(), 4);
  for (std::size_t threads : {1, 3}) {
    CpuEngine engine(threads, 0);
    Batch b(12, lens, 1);
    int calls = 0;
    std::size_t handed_end = 0;
    engine.seal_in_parts(b.ops, ends, [&](std::size_t, std::size_t e) {
      ++calls;
      handed_end = e;
      return false;
    });
    EXPECT_EQ(calls, 1) << threads;
    EXPECT_GE(handed_end, 1u);
    // The engine is idle and whole afterwards: the next batch comes out right.
    expect_next_batch_right(engine, 13, lens);
  }
}

TEST(CpuEngine, SealInPartsRethrowsWhatTheWriterThrowsOnceTheHelpersAreDone) {
  const auto lens = stream_lengths();
  const auto ends = part_ends(lens.size(), 4);
  for (std::size_t threads : {1, 3}) {
    CpuEngine engine(threads, 0);
    Batch b(16, lens, 1);
    int calls = 0;
    EXPECT_THROW(engine.seal_in_parts(b.ops, ends,
                                      [&](std::size_t, std::size_t) -> bool {
                                        ++calls;
                                        throw std::runtime_error("the writer failed");
                                      }),
                 std::runtime_error);
    EXPECT_EQ(calls, 1) << threads;
    // Nothing seals into the ops any more: they can go, and the engine takes the next batch.
    b.ops.clear();
    expect_next_batch_right(engine, 17, lens);
  }
}

TEST(CpuEngine, SealInPartsRethrowsAndNeverHandsOverAFailedPart) {
  const auto lens = stream_lengths();
  const auto ends = part_ends(lens.size(), 5);  // op 17 lies in part 3
  for (std::size_t threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    CpuEngine engine(threads, 0);
    Batch b(14, lens, 2);
    b.ops[17].key = nullptr;  // the engine refuses such an op with std::invalid_argument
    std::size_t handed_end = 0;
    EXPECT_THROW(engine.seal_in_parts(b.ops, ends,
                                      [&](std::size_t, std::size_t e) {
                                        handed_end = e;
                                        return true;
                                      }),
                 std::invalid_argument);
    EXPECT_LE(handed_end, 3u);
  }
}

// The point of parts: while the caller writes out the first ones, helpers seal the rest. A writer
// that takes 20 ms over its first run finds every later part sealed when it comes back, and gets
// them all in its second call. (A helper that did not wake before the caller had sealed everything
// leaves one call for the whole batch, as happens on a busy machine: that attempt proves nothing
// and is repeated, for up to 5 seconds.)
TEST(CpuEngine, SealInPartsSealsLaterPartsWhileTheCallerWrites) {
  const std::vector<std::size_t> lens(512, 16384);  // 8 MiB in 64 parts
  const auto ends = part_ends(lens.size(), 8);
  CpuEngine engine(3, 0);
  bool overlapped = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int attempts = 0;
  for (; !overlapped && std::chrono::steady_clock::now() < give_up; ++attempts) {
    Batch b(15, lens, 1);
    std::vector<std::pair<std::size_t, std::size_t>> runs;
    engine.seal_in_parts(b.ops, ends, [&](std::size_t a, std::size_t e) {
      runs.emplace_back(a, e);
      if (runs.size() == 1 && e < ends.size()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return true;
    });
    if (runs.size() < 2) continue;
    EXPECT_EQ(runs[1].second, ends.size()) << "the helpers sealed nothing while the caller wrote part " << runs[0].first;
    overlapped = true;
  }
  EXPECT_TRUE(overlapped) << "no helper joined an 8 MiB batch in " << attempts << " attempts";
}

TEST(ThreadPool, OfferRunsTheTaskOnAsManyWorkersAsAsked) {
  ThreadPool pool(3);
  for (std::size_t n : {0, 1, 3, 5}) {
    std::atomic<int> ran{0};
    const std::size_t queued = pool.offer(n, [&] { ran.fetch_add(1); });
    EXPECT_EQ(queued, std::min<std::size_t>(n, 3));
    for (int i = 0; i < 2000 && ran.load() < static_cast<int>(queued); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // and no more than that
    EXPECT_EQ(ran.load(), static_cast<int>(queued)) << n;
  }
}

TEST(ThreadPool, RunsEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.workers(), 3u);
  for (std::size_t count : {0, 1, 2, 3, 4, 5, 100, 1000}) {
    std::vector<std::atomic<int>> hits(count);
    pool.parallel_for(count, [&](std::size_t i) { hits[i].fetch_add(1); });
    for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(hits[i].load(), 1) << count << "/" << i;
  }
}

TEST(ThreadPool, PropagatesExceptionsAfterAllItemsFinish) {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  EXPECT_THROW(pool.parallel_for(50,
                                 [&](std::size_t i) {
                                   done.fetch_add(1);
                                   if (i == 7) throw std::runtime_error("item 7");
                                 }),
               std::runtime_error);
  EXPECT_EQ(done.load(), 50);
  // The pool is still usable.
  std::atomic<int> again{0};
  pool.parallel_for(10, [&](std::size_t) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 10);
}

// A batch that may use at most N helpers runs on at most N + 1 threads (the cpu engine gives each
// of several batches in flight its share of the cores this way), and on the caller alone for 0.
TEST(ThreadPool, MaxHelpersBoundsTheThreadsOfABatch) {
  ThreadPool pool(3);
  for (std::size_t max_helpers : {0, 1, 2}) {
    std::mutex mu;
    std::set<std::thread::id> seen;
    std::atomic<int> hits{0};
    pool.parallel_for(
        200,
        [&](std::size_t) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));  // long enough for helpers to join
          hits.fetch_add(1);
          std::lock_guard lk(mu);
          seen.insert(std::this_thread::get_id());
        },
        max_helpers);
    EXPECT_EQ(hits.load(), 200);
    EXPECT_LE(seen.size(), max_helpers + 1) << max_helpers;
    if (max_helpers == 0) {
      EXPECT_EQ(seen, std::set<std::thread::id>{std::this_thread::get_id()});
    }
  }
}

TEST(ThreadPool, ZeroWorkersRunsOnCaller) {
  ThreadPool pool(0);
  const auto me = std::this_thread::get_id();
  bool all_here = true;
  pool.parallel_for(5, [&](std::size_t) { all_here = all_here && std::this_thread::get_id() == me; });
  EXPECT_TRUE(all_here);
}

}  // namespace
}  // namespace gcfs
