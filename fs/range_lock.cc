#include "fs/range_lock.h"

namespace gcfs {

bool RangeLock::conflicts(std::uint64_t first, std::uint64_t last, bool exclusive) const {
  for (const auto& h : held_)
    if (first <= h.last && h.first <= last && (exclusive || h.exclusive)) return true;
  return false;
}

RangeLock::Guard RangeLock::lock(std::uint64_t first, std::uint64_t last, bool exclusive) {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !conflicts(first, last, exclusive); });
  held_.push_back({first, last, exclusive});
  return Guard(*this, std::prev(held_.end()));
}

void RangeLock::release(std::list<Held>::iterator it) {
  {
    std::lock_guard lk(mu_);
    held_.erase(it);
  }
  cv_.notify_all();
}

}  // namespace gcfs
