#include "crypto/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>

namespace gcfs {

ThreadPool::ThreadPool(std::size_t workers) {
  threads_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { run(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ThreadPool::parallel_for(std::size_t count, const std::function<void(std::size_t)>& fn,
                              std::size_t max_helpers) {
  if (count == 0) return;
  if (count == 1 || threads_.empty() || max_helpers == 0) {
    for (std::size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  // Items are claimed from a shared counter, so uneven items balance themselves; the state lives
  // in a shared_ptr because a helper may still be finishing its last claim check after we return.
  struct State {
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> done{0};
    std::mutex mu;
    std::condition_variable cv;
    std::exception_ptr error;
  };
  auto st = std::make_shared<State>();
  auto work = [st, count, &fn] {
    for (std::size_t i; (i = st->next.fetch_add(1)) < count;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lk(st->mu);
        if (!st->error) st->error = std::current_exception();
      }
      if (st->done.fetch_add(1) + 1 == count) {
        std::lock_guard lk(st->mu);
        st->cv.notify_all();
      }
    }
  };
  offer(std::min(count - 1, max_helpers), work);
  work();
  std::unique_lock lk(st->mu);
  st->cv.wait(lk, [&] { return st->done.load() == count; });
  if (st->error) std::rethrow_exception(st->error);
}

std::size_t ThreadPool::offer(std::size_t n, const std::function<void()>& task) {
  const std::size_t helpers = std::min(threads_.size(), n);
  {
    std::lock_guard lk(mu_);
    for (std::size_t h = 0; h < helpers; ++h) queue_.emplace_back(task);
  }
  // One wake-up per task queued: waking every worker for a batch that needs two of them makes
  // the rest take the lock only to find the queue empty.
  for (std::size_t h = 0; h < helpers; ++h) cv_.notify_one();
  return helpers;
}

}  // namespace gcfs
