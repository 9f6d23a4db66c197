// The io_uring transport's bulk workers (mount/bulk_workers.h): tasks run off the posting thread,
// in order on one worker, more workers only while none is idle and up to the cap, every worker
// set up first, and stop() joining them with the queued tasks dropped.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <gtest/gtest.h>
#include <mutex>
#include <set>
#include <thread>

#include "mount/bulk_workers.h"

namespace gcfs::mount {
namespace {

// A latch the tasks wait on, so that the test decides when workers are busy.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return open; });
  }
  void release() {
    std::lock_guard lk(mu);
    open = true;
    cv.notify_all();
  }
};

void wait_until(const std::function<bool()>& done) {
  for (int i = 0; i < 2000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TEST(BulkWorkers, StartsNoThreadUntilWorkComesAndRunsItElsewhere) {
  std::atomic<int> set_up{0};
  BulkWorkers w(4, [&] { ++set_up; });
  EXPECT_EQ(w.started(), 0u);
  std::atomic<bool> ran{false};
  std::thread::id where;
  std::mutex mu;
  w.post([&] {
    std::lock_guard lk(mu);
    where = std::this_thread::get_id();
    ran = true;
  });
  wait_until([&] { return ran.load(); });
  ASSERT_TRUE(ran.load());
  std::lock_guard lk(mu);
  EXPECT_NE(where, std::this_thread::get_id());
  EXPECT_EQ(w.started(), 1u);
  EXPECT_EQ(set_up.load(), 1);
}

TEST(BulkWorkers, AnIdleWorkerTakesTheNextTaskInsteadOfANewThread) {
  BulkWorkers w(4, nullptr);
  for (int i = 0; i < 20; ++i) {
    std::atomic<bool> ran{false};
    w.post([&] { ran = true; });
    wait_until([&] { return ran.load(); });
    ASSERT_TRUE(ran.load());
    wait_until([&] { return w.idle() == 1; });  // back in its wait before the next post
  }
  EXPECT_EQ(w.started(), 1u);
}

TEST(BulkWorkers, BusyWorkersGetCompanyUpToTheCap) {
  Gate gate;
  std::atomic<int> running{0};
  std::set<std::thread::id> threads;
  std::mutex mu;
  BulkWorkers w(3, nullptr);
  for (int i = 0; i < 5; ++i)
    w.post([&] {
      {
        std::lock_guard lk(mu);
        threads.insert(std::this_thread::get_id());
      }
      ++running;
      gate.wait();
    });
  wait_until([&] { return running.load() == 3; });
  EXPECT_EQ(running.load(), 3);  // three at work, two queued behind them
  EXPECT_EQ(w.started(), 3u);
  gate.release();
  wait_until([&] { return running.load() == 5; });
  EXPECT_EQ(running.load(), 5);
  EXPECT_EQ(w.started(), 3u);
  std::lock_guard lk(mu);
  EXPECT_EQ(threads.size(), 3u);
}

TEST(BulkWorkers, StopFinishesRunningTasksAndDropsQueuedOnes) {
  Gate gate;
  std::atomic<int> started{0}, finished{0};
  BulkWorkers w(1, nullptr);
  for (int i = 0; i < 3; ++i)
    w.post([&] {
      ++started;
      gate.wait();
      ++finished;
    });
  wait_until([&] { return started.load() == 1; });
  std::thread stopper([&] { w.stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.release();
  stopper.join();
  EXPECT_EQ(started.load(), 1);
  EXPECT_EQ(finished.load(), 1);
  w.post([&] { ++started; });  // after stop: dropped, no thread started
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(started.load(), 1);
  w.stop();  // idempotent
}

}  // namespace
}  // namespace gcfs::mount
