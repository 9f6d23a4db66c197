#include "fs/range_lock.h"

namespace gcfs {

std::uint32_t RangeLock::stripes_of(std::uint64_t first, std::uint64_t last) {
  const std::uint64_t a = first / kStripeChunks, b = last / kStripeChunks;
  if (b - a + 1 >= kStripes) return (std::uint64_t{1} << kStripes) - 1;
  std::uint32_t set = 0;
  for (std::uint64_t s = a; s <= b; ++s) set |= std::uint32_t{1} << (s % kStripes);
  return set;
}

bool RangeLock::conflicts(const Stripe& s, std::uint64_t first, std::uint64_t last, bool exclusive) {
  for (const Node* h = s.held.next; h != &s.held; h = h->next)
    if (first <= h->last && h->first <= last && (exclusive || h->exclusive)) return true;
  return false;
}

RangeLock::Guard RangeLock::lock(std::uint64_t first, std::uint64_t last, bool exclusive) {
  // The nodes are made and freed outside the mutexes: every read and write of the file takes
  // this lock, and an allocation inside it lengthened what concurrent requests wait on.
  auto h = std::make_unique<Holding>();
  h->stripes = stripes_of(first, last);
  for (unsigned i = 0; i < kStripes; ++i) {
    if (!(h->stripes >> i & 1)) continue;
    Stripe& s = stripes_[i];
    Node& n = h->nodes[i];
    n.first = first;
    n.last = last;
    n.exclusive = exclusive;
    std::unique_lock lk(s.mu);
    while (conflicts(s, first, last, exclusive)) {
      ++s.waiters;
      s.cv.wait(lk);
      --s.waiters;
    }
    n.prev = s.held.prev;
    n.next = &s.held;
    s.held.prev->next = &n;
    s.held.prev = &n;
  }
  return Guard(*this, std::move(h));
}

void RangeLock::release(Holding& h) {
  for (unsigned i = 0; i < kStripes; ++i) {
    if (!(h.stripes >> i & 1)) continue;
    Stripe& s = stripes_[i];
    Node& n = h.nodes[i];
    bool wake;
    {
      std::lock_guard lk(s.mu);
      n.prev->next = n.next;
      n.next->prev = n.prev;
      wake = s.waiters > 0;
    }
    if (wake) s.cv.notify_all();
  }
}

}  // namespace gcfs
