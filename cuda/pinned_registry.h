// The page-locked buffers the gpu engine handed out (allocate_io_buffer), so that a batch can tell
// which ops the GPU may copy, or read and write, in the caller's own memory. Internal to cuda/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

namespace gcfs::gpu {

// The page-locked buffers this engine handed out (allocate_io_buffer): an op whose data lies wholly
// inside one of them is copied by the GPU's copy engines straight from and to the caller's memory,
// with no CPU copy through the staging buffers. Shared with the buffers' release functions, since a
// thread's buffers may outlive the engine.
class PinnedRegistry {
 public:
  void add(const std::uint8_t* p, std::size_t n) {
    std::lock_guard lock(mu_);
    ranges_[reinterpret_cast<std::uintptr_t>(p)] = n;
  }
  void remove(const std::uint8_t* p) {
    std::lock_guard lock(mu_);
    ranges_.erase(reinterpret_cast<std::uintptr_t>(p));
  }
  // Whether [p, p + n) lies inside one registered buffer. Called for every op of a batch, under
  // one lock per batch (the caller holds `lock()`): a map lookup, tens of nanoseconds.
  bool contains_locked(const void* p, std::size_t n) const { return buffer_of_locked(p, n) != 0; }
  // The start of the registered buffer that holds [p, p + n), or 0 where none does.
  std::uintptr_t buffer_of_locked(const void* p, std::size_t n) const {
    if (ranges_.empty() || !p) return 0;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return 0;
    --it;
    return a - it->first <= it->second && n <= it->second - (a - it->first) ? it->first : 0;
  }
  std::unique_lock<std::shared_mutex> lock() { return std::unique_lock(mu_); }
  // For lookups alone (contains_locked, buffer_of_locked), by many callers at once.
  std::shared_lock<std::shared_mutex> shared_lock() { return std::shared_lock(mu_); }

 private:
  mutable std::shared_mutex mu_;
  std::map<std::uintptr_t, std::size_t> ranges_;  // start -> length
};

// One registry for the whole process: buffers are allocated portable (page-locked for every GPU),
// so when `--engine auto` runs one gpu engine per GPU, each of them takes the buffers the first one
// handed out as its own and skips staging for them too.
inline std::shared_ptr<PinnedRegistry> shared_pinned_registry() {
  static const auto registry = std::make_shared<PinnedRegistry>();
  return registry;
}

}  // namespace gcfs::gpu
