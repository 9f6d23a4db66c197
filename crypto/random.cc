#include "crypto/random.h"

#include <openssl/rand.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace gcfs {

void random_bytes(std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    int n = static_cast<int>(std::min<std::size_t>(out.size() - done, INT_MAX));
    if (RAND_bytes(out.data() + done, n) != 1)
      throw std::runtime_error("the random number generator failed (OpenSSL RAND_bytes)");
    done += static_cast<std::size_t>(n);
  }
}

namespace {

// Bumped in every child of fork(): a pool filled under an older value was inherited.
std::atomic<std::uint64_t> fork_generation{1};
void after_fork_in_child() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

void random_public_bytes(std::span<std::uint8_t> out) {
  static std::once_flag registered;
  std::call_once(registered, [] { ::pthread_atfork(nullptr, nullptr, after_fork_in_child); });
  struct Pool {
    std::array<std::uint8_t, 512> bytes;
    std::size_t used = 512;  // empty
    std::uint64_t generation = 0;
  };
  thread_local Pool pool;
  if (out.size() > pool.bytes.size()) return random_bytes(out);
  const std::uint64_t gen = fork_generation.load(std::memory_order_relaxed);
  if (pool.generation != gen || pool.bytes.size() - pool.used < out.size()) {
    random_bytes(pool.bytes);
    pool.used = 0;
    pool.generation = gen;
  }
  std::memcpy(out.data(), pool.bytes.data() + pool.used, out.size());
  // Handed out once: zeroed so that nothing can hand these bytes out a second time.
  std::memset(pool.bytes.data() + pool.used, 0, out.size());
  pool.used += out.size();
}

}  // namespace gcfs
