// RangeLock: what may run together and what must wait. A test that waits forever on a lock that
// should have been granted fails by the ctest timeout; one that is granted a lock it must not get
// fails at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "fs/range_lock.h"

namespace gcfs {
namespace {

// Holding a lock, take another on a second thread and wait for it: returns only if compatible.
void expect_granted_while_held(RangeLock& l, std::uint64_t f, std::uint64_t t, bool ex) {
  std::thread th([&] { auto g = l.lock(f, t, ex); });
  th.join();
}

// Holding the first lock, a second thread's lock is not granted until the first is released.
void expect_waits_for_release(std::uint64_t f1, std::uint64_t t1, bool ex1, std::uint64_t f2, std::uint64_t t2,
                              bool ex2) {
  RangeLock l;
  std::atomic<bool> got{false};
  auto first = std::make_unique<RangeLock::Guard>(l.lock(f1, t1, ex1));
  std::thread th([&] {
    auto g = l.lock(f2, t2, ex2);
    got = true;
  });
  // Not granted while the first is held (a slow thread only makes this pass more easily).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(got.load()) << f1 << "-" << t1 << " vs " << f2 << "-" << t2;
  first.reset();
  th.join();
  EXPECT_TRUE(got.load());
}

TEST(RangeLock, CompatibleLocksAreGrantedTogether) {
  RangeLock l;
  auto a = l.lock(0, 5, true);
  expect_granted_while_held(l, 6, 9, true);    // disjoint exclusive
  expect_granted_while_held(l, 6, 100, false);  // disjoint shared
  auto s = l.lock(10, 20, false);
  expect_granted_while_held(l, 15, 30, false);  // overlapping shared
  expect_granted_while_held(l, 10, 10, false);
}

TEST(RangeLock, ConflictingLocksWaitForRelease) {
  struct Case {
    std::uint64_t f1, t1;
    bool ex1;
    std::uint64_t f2, t2;
    bool ex2;
  };
  const Case cases[] = {
      {0, 5, true, 5, 9, true},     // shares the edge chunk
      {0, 5, true, 0, 0, false},    // reader inside a writer's range
      {3, 3, false, 0, 9, true},    // writer over a reader
      {0, 9, true, 4, 4, true},     // inside
  };
  for (const auto& c : cases) expect_waits_for_release(c.f1, c.t1, c.ex1, c.f2, c.t2, c.ex2);
}

TEST(RangeLock, ExclusiveHoldersNeverOverlap) {
  RangeLock l;
  std::vector<std::atomic<int>> owners(16);
  std::atomic<int> violations{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      std::uint64_t x = t * 2654435761u;
      for (int i = 0; i < 2000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const std::uint64_t f = (x >> 33) % 16, len = (x >> 20) % 4;
        const std::uint64_t last = std::min<std::uint64_t>(15, f + len);
        auto g = l.lock(f, last, true);
        for (std::uint64_t k = f; k <= last; ++k)
          if (owners[k].exchange(t + 1) != 0) ++violations;
        for (std::uint64_t k = f; k <= last; ++k) owners[k] = 0;
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(violations.load(), 0);
}

// Ranges held in stripes: locks that share chunks in any stripe, that span many stripes, that
// wrap around the stripes, or that cover them all are ordered all the same.
TEST(RangeLock, RangesAcrossStripesConflictWhereTheyShareAChunk) {
  constexpr std::uint64_t S = RangeLock::kStripeChunks, N = RangeLock::kStripes;
  struct Case {
    std::uint64_t f1, t1, f2, t2;
  };
  const Case cases[] = {
      {0, S * N * 4, 5 * S + 3, 5 * S + 3},                  // one range over every stripe, a chunk inside
      {S * N - 1, S * N, S * N, S * N},                      // the wrap from the last stripe to the first
      {S * N * 7 + 2, S * N * 7 + 2, S * N * 7 + 2, S * N * 7 + 2},  // the same far chunk
      {3 * S, 9 * S - 1, 8 * S + 1, 12 * S},                 // two long ranges meeting in one stripe
  };
  for (const auto& c : cases) expect_waits_for_release(c.f1, c.t1, true, c.f2, c.t2, false);
  // The same stripe, other chunks: granted together (chunk S * N lies in chunk 0's stripe).
  RangeLock l;
  auto a = l.lock(0, 0, true);
  expect_granted_while_held(l, S * N, S * N, true);
  expect_granted_while_held(l, 1, S * N * 3, false);
}

TEST(RangeLock, ManyStripesNeverDeadlockAndWritersNeverOverlap) {
  // Ranges from one chunk to more than all the stripes, readers and writers, on 8 threads: every
  // thread finishes (a cycle of waits would hang the test into its timeout), and no chunk ever
  // has a writer beside anyone else.
  constexpr std::uint64_t kChunks = RangeLock::kStripeChunks * RangeLock::kStripes * 3;
  RangeLock l;
  std::vector<std::atomic<int>> users(kChunks);  // -1: a writer; n > 0: n readers
  std::atomic<int> violations{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      std::uint64_t x = (t + 1) * 0x9E3779B97F4A7C15ull;
      for (int i = 0; i < 3000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const std::uint64_t f = (x >> 33) % kChunks;
        const std::uint64_t len = (x >> 12) % 8 == 0 ? (x >> 20) % kChunks : (x >> 20) % 40;
        const std::uint64_t last = std::min<std::uint64_t>(kChunks - 1, f + len);
        const bool ex = (x >> 40) % 3 == 0;
        auto g = l.lock(f, last, ex);
        for (std::uint64_t k = f; k <= last; ++k) {
          if (ex) {
            if (users[k].exchange(-1) != 0) ++violations;
          } else if (users[k].fetch_add(1) < 0) {
            ++violations;
          }
        }
        for (std::uint64_t k = f; k <= last; ++k) {
          if (ex) users[k] = 0;
          else users[k].fetch_sub(1);
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(violations.load(), 0);
}

}  // namespace
}  // namespace gcfs
