// RangeLock: what may run together and what must wait. A test that waits forever on a lock that
// should have been granted fails by the ctest timeout; one that is granted a lock it must not get
// fails at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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
  for (const auto& c : cases) {
    RangeLock l;
    std::atomic<bool> got{false};
    auto first = std::make_unique<RangeLock::Guard>(l.lock(c.f1, c.t1, c.ex1));
    std::thread th([&] {
      auto g = l.lock(c.f2, c.t2, c.ex2);
      got = true;
    });
    // Not granted while the first is held (a slow thread only makes this pass more easily).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(got.load()) << c.f1 << "-" << c.t1 << " vs " << c.f2 << "-" << c.t2;
    first.reset();
    th.join();
    EXPECT_TRUE(got.load());
  }
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

}  // namespace
}  // namespace gcfs
