// A caller thread's place to sleep until another thread wakes it: one futex word per thread,
// shared by the gpu engine's request queue and its resident worker. Internal to cuda/.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>

namespace gcfs::gpu {

// Sleeps while word holds expected (for at most *timeout, where given); returns at once otherwise.
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       const std::chrono::nanoseconds* timeout = nullptr) {
  timespec ts{};
  if (timeout) ts.tv_sec = timeout->count() / 1000000000, ts.tv_nsec = timeout->count() % 1000000000;
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, timeout ? &ts : nullptr,
            nullptr, 0);
}
inline void futex_wake(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

// Where a caller's thread sleeps: one futex word per thread, outliving any one request (a waker
// holds a reference while it wakes, so a caller that already left, or a thread that ended, is
// never woken through freed memory).
//
// Wakes are decided under the engine's lock and carried out after it is released
// (unlock_and_wake): a thread woken while the waker still holds the lock would only block on it at
// once, and with many callers that convoy on one mutex (and the futex bucket behind it) was most
// of a small request's host time (perf on the H100 machine, 32 callers of 4 KiB and of 128 KiB:
// futex waits, wakes and their bucket's spin lock took over 40% of the samples).
struct Waiter {
  std::atomic<std::uint32_t> signal{0};
  // Before the caller checks its conditions under the lock: any wake decided after that check
  // comes after this, so it is not lost.
  void arm() { signal.store(0, std::memory_order_relaxed); }
  void wait() {
    while (signal.load(std::memory_order_acquire) == 0) futex_wait(signal, 0);
  }
  void wake() {
    signal.store(1, std::memory_order_release);
    futex_wake(signal);
  }
};

inline std::shared_ptr<Waiter> this_thread_waiter() {
  thread_local const std::shared_ptr<Waiter> w = std::make_shared<Waiter>();
  return w;
}

}  // namespace gcfs::gpu
