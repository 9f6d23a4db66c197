// A fixed set of worker threads that run the parts of one batch in parallel. The calling thread
// takes a share of the work itself, so a pool of N workers keeps N+1 cores busy and a batch of one
// item never pays for a thread hand-off.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gcfs {

class ThreadPool {
 public:
  explicit ThreadPool(std::size_t workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  std::size_t workers() const { return threads_.size(); }

  // Calls fn(i) for every i in [0, count) and returns when all calls have returned, with at
  // most max_helpers workers beside the calling thread (0: run it all on the calling thread).
  void parallel_for(std::size_t count, const std::function<void(std::size_t)>& fn,
                    std::size_t max_helpers = static_cast<std::size_t>(-1));

  // Queues task for up to n workers (never more than the pool has) and wakes that many; returns
  // how many were queued. Each runs it once, whenever it gets to it, perhaps after the caller has
  // moved on: the task must own what it touches (a shared_ptr) and find out for itself whether
  // anything is left to do.
  std::size_t offer(std::size_t n, const std::function<void()>& task);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gcfs
