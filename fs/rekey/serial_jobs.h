// One thread that runs jobs in the order they were posted: the re-key's name changes (renames,
// the directory's sync, the removal of old names), which must follow each other within a batch,
// run there while the walk goes on copying the next directory's files. On a small machine that
// overlap is most of what a tree of small files can gain: those steps are system calls under the
// directory's lock, which no second thread in the same directory would speed up.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace gcfs {

class SerialJobs {
 public:
  SerialJobs() = default;
  // Waits for what was posted; an error it meets is dropped (the caller is already failing).
  ~SerialJobs() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  SerialJobs(const SerialJobs&) = delete;
  SerialJobs& operator=(const SerialJobs&) = delete;

  // Runs job after every job posted before it. Once a job has thrown, later ones are dropped.
  void post(std::function<void()> job) {
    std::lock_guard lk(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { serve(); });
    jobs_.push_back(std::move(job));
    cv_.notify_all();
  }

  // Returns once every job posted has run; rethrows the first exception one threw.
  void drain() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return jobs_.empty() && !busy_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void serve() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      if (error_) continue;
      busy_ = true;
      lk.unlock();
      try {
        job();
      } catch (...) {
        lk.lock();
        error_ = std::current_exception();
        busy_ = false;
        cv_.notify_all();
        continue;
      }
      lk.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false, busy_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace gcfs
