#include "mount/bulk_workers.h"

#include <pthread.h>
#include <sched.h>

namespace gcfs::mount {

BulkWorkers::BulkWorkers(unsigned max_threads, std::function<void()> on_start, std::vector<unsigned> cpus)
    : max_threads_(max_threads == 0 ? 1 : max_threads), on_start_(std::move(on_start)), cpus_(std::move(cpus)) {}

BulkWorkers::~BulkWorkers() { stop(); }

void BulkWorkers::post(std::function<void()> task) {
  {
    std::lock_guard lk(mu_);
    if (stop_) return;
    queue_.push_back(std::move(task));
    // A worker already asleep takes it; otherwise one more, while the cap allows (the queue waits
    // for the next free one beyond it).
    if (idle_ < queue_.size() && threads_.size() < max_threads_) threads_.emplace_back([this] { run(); });
  }
  cv_.notify_one();
}

void BulkWorkers::run() {
  if (!cpus_.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned c : cpus_)
      if (c < CPU_SETSIZE) CPU_SET(c, &set);
    ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
  }
  if (on_start_) on_start_();
  std::unique_lock lk(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    --idle_;
    if (stop_) return;
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    task();
    lk.lock();
  }
}

void BulkWorkers::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    queue_.clear();
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

unsigned BulkWorkers::started() const {
  std::lock_guard lk(mu_);
  return static_cast<unsigned>(threads_.size());
}

unsigned BulkWorkers::idle() const {
  std::lock_guard lk(mu_);
  return idle_;
}

}  // namespace gcfs::mount
