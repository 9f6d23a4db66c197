#include "fs/range_lock.h"

namespace gcfs {

bool RangeLock::conflicts(std::uint64_t first, std::uint64_t last, bool exclusive) const {
  for (const auto& h : held_)
    if (first <= h.last && h.first <= last && (exclusive || h.exclusive)) return true;
  return false;
}

RangeLock::Guard RangeLock::lock(std::uint64_t first, std::uint64_t last, bool exclusive) {
  // The list node is made and freed outside the mutex: every read and write of the file takes
  // this lock, and an allocation inside it lengthened what concurrent requests wait on.
  std::list<Held> node{{first, last, exclusive}};
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !conflicts(first, last, exclusive); });
  held_.splice(held_.end(), node);
  return Guard(*this, std::prev(held_.end()));
}

void RangeLock::release(std::list<Held>::iterator it) {
  std::list<Held> node;  // freed after the mutex is released
  {
    std::lock_guard lk(mu_);
    node.splice(node.end(), held_, it);
  }
  cv_.notify_all();
}

}  // namespace gcfs
