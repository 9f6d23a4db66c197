// Threads that take work off an io_uring serving thread, for requests worth running on another
// CPU than the one they came from (mount/uring_transport.cc says which and why). Started on
// demand, at most `max_threads`, so a mount that never sees such a request starts none.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gcfs::mount {

class BulkWorkers {
 public:
  // on_start runs first on every worker thread (the engine's per-thread setup). cpus: where the
  // workers may run (empty: anywhere; best effort, a cpuset may forbid it).
  BulkWorkers(unsigned max_threads, std::function<void()> on_start, std::vector<unsigned> cpus = {});
  ~BulkWorkers();
  BulkWorkers(const BulkWorkers&) = delete;
  BulkWorkers& operator=(const BulkWorkers&) = delete;

  // Runs task on a worker, in the order posted; starts another worker when none is idle and the
  // cap allows. After stop(), tasks are dropped.
  void post(std::function<void()> task);
  // Finishes the task each worker is running, drops the queued ones, joins (idempotent).
  void stop();
  unsigned started() const;
  unsigned idle() const;  // started and waiting for a task

 private:
  void run();
  const unsigned max_threads_;
  const std::function<void()> on_start_;
  const std::vector<unsigned> cpus_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  unsigned idle_ = 0;
  bool stop_ = false;
};

}  // namespace gcfs::mount
