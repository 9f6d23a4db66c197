// Reader-writer locks over ranges of chunks. Requests that touch different chunks of one file run
// at once (a volume image gets all its I/O through a single file, and the gpu engine needs
// concurrent requests to batch); requests that share a chunk are ordered, so a read never sees a
// chunk half rewritten and two read-modify-writes of one chunk never lose each other's bytes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>

namespace gcfs {

class RangeLock {
  struct Held {
    std::uint64_t first, last;
    bool exclusive;
  };

 public:
  class Guard {
   public:
    Guard(RangeLock& lock, std::list<Held>::iterator it) : lock_(&lock), it_(it) {}
    Guard(Guard&& o) noexcept : lock_(o.lock_), it_(o.it_) { o.lock_ = nullptr; }
    Guard(const Guard&) = delete;
    ~Guard() {
      if (lock_) lock_->release(it_);
    }

   private:
    RangeLock* lock_;
    std::list<Held>::iterator it_;
  };

  Guard lock(std::uint64_t first, std::uint64_t last, bool exclusive);

 private:
  void release(std::list<Held>::iterator it);
  bool conflicts(std::uint64_t first, std::uint64_t last, bool exclusive) const;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Held> held_;
};

}  // namespace gcfs
