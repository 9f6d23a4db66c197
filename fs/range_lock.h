// Reader-writer locks over ranges of chunks. Requests that touch different chunks of one file run
// at once (a volume image gets all its I/O through a single file, and the gpu engine needs
// concurrent requests to batch); requests that share a chunk are ordered, so a read never sees a
// chunk half rewritten and two read-modify-writes of one chunk never lose each other's bytes.
//
// The held ranges are kept in stripes, each with its own mutex: chunk k belongs to stripe
// (k / kStripeChunks) % kStripes, and a range is entered in every stripe that one of its chunks
// belongs to. Two ranges that share a chunk share that chunk's stripe, where the later one sees
// the earlier and waits. Requests on different parts of a file take different mutexes: with one
// mutex per file, 8 threads of random 4 KiB reads on one file spent about 9% of the daemon's
// time taking and giving it back, futex sleeps included (H100 machine, docs/BENCHMARKS.md).
// A range enters its stripes in ascending order and waits only at the stripe it is entering, on
// ranges entered there before it; such a range is either done entering or waiting at a higher
// stripe, so no chain of waits closes into a cycle.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace gcfs {

class RangeLock {
 public:
  static constexpr unsigned kStripes = 16;
  static constexpr std::uint64_t kStripeChunks = 16;  // 64 KiB of 4 KiB chunks per stripe in a row

 private:
  // A range's entry in one stripe: a node of that stripe's circular list of held ranges.
  struct Node {
    Node* prev = this;
    Node* next = this;
    std::uint64_t first = 0, last = 0;
    bool exclusive = false;
  };
  struct Holding {
    std::uint32_t stripes = 0;  // bit i: entered in stripe i
    Node nodes[kStripes];
  };
  struct alignas(64) Stripe {
    std::mutex mu;
    std::condition_variable cv;
    Node held;  // the list's head; its own range is never looked at
    unsigned waiters = 0;
  };

 public:
  class Guard {
   public:
    Guard(RangeLock& lock, std::unique_ptr<Holding> h) : lock_(&lock), holding_(std::move(h)) {}
    Guard(Guard&& o) noexcept = default;
    Guard(const Guard&) = delete;
    ~Guard() {
      if (holding_) lock_->release(*holding_);
    }

   private:
    RangeLock* lock_;
    std::unique_ptr<Holding> holding_;
  };

  RangeLock() = default;
  RangeLock(const RangeLock&) = delete;
  RangeLock& operator=(const RangeLock&) = delete;

  Guard lock(std::uint64_t first, std::uint64_t last, bool exclusive);

 private:
  // The stripes that chunks [first, last] belong to, as a bit set.
  static std::uint32_t stripes_of(std::uint64_t first, std::uint64_t last);
  static bool conflicts(const Stripe& s, std::uint64_t first, std::uint64_t last, bool exclusive);
  void release(Holding& h);
  Stripe stripes_[kStripes];
};

}  // namespace gcfs
