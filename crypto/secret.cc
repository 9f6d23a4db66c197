#include "crypto/secret.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <new>

namespace gcfs {
namespace {

// The secure heap holds keys (32 and 64 bytes), key-wrapping keys and passwords: a few hundred
// bytes at a time, so 256 KiB is ample, and small next to the 8 MiB RLIMIT_MEMLOCK that current
// systems give unprivileged users. The gpu engine's key schedules (about 57 KiB each, up to a
// thousand of them) and the password file's read buffer are larger than kHeapMaxBlock: those get
// pages of their own.
constexpr std::size_t kArenaBytes = std::size_t{256} << 10;  // a power of two, as OpenSSL requires
constexpr std::size_t kArenaMinBlock = 16;
constexpr std::size_t kHeapMaxBlock = 1024;

struct SecretMemory {
  void* arena = nullptr;  // the secure heap's arena, found once so that a forked child can lock it again
  std::mutex pages_mu;
  std::map<void*, std::size_t> pages;  // blocks on pages of their own: start -> mapped length
};

SecretMemory& memory() {
  static SecretMemory* m = new SecretMemory;  // never destroyed: secrets may be freed during exit
  return *m;
}

// The system call itself, as OpenSSL's secure heap makes it (mlock2): AddressSanitizer replaces the
// mlock() library function with one that does nothing, which would leave sanitized builds (and
// their tests) with unlocked secrets.
void lock_pages(void* p, std::size_t len) { (void)::syscall(SYS_mlock, p, len); }

std::size_t page_size() {
  static const std::size_t n = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return n;
}

// fork() copies memory but not its locks (mlock(2)): the child locks the arena and every page block
// again. The pages' mutex is held across the fork, so the child's map is not caught mid-change.
void before_fork() { memory().pages_mu.lock(); }
void after_fork_parent() { memory().pages_mu.unlock(); }
void after_fork_child() {
  SecretMemory& m = memory();
  if (m.arena) lock_pages(m.arena, kArenaBytes);
  for (const auto& [p, len] : m.pages) lock_pages(p, len);
  m.pages_mu.unlock();
}

void set_up() {
  static std::once_flag once;
  std::call_once(once, [] {
    SecretMemory& m = memory();
    // 1: the arena is locked; 2: it works but mlock (or madvise) was refused; 0: no secure heap
    // (or another part of the process made one first: its size is unknown, so it is not used).
    if (!CRYPTO_secure_malloc_initialized() && CRYPTO_secure_malloc_init(kArenaBytes, kArenaMinBlock) != 0) {
      // A block as large as the arena can only be the arena itself: that is where it starts.
      void* whole = CRYPTO_secure_malloc(kArenaBytes, nullptr, 0);
      if (whole && CRYPTO_secure_actual_size(whole) == kArenaBytes) m.arena = whole;
      if (whole) CRYPTO_secure_free(whole, nullptr, 0);
    }
    ::pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  });
}

bool in_arena(const void* p) {
  const SecretMemory& m = memory();
  const auto* a = static_cast<const std::uint8_t*>(m.arena);
  const auto* q = static_cast<const std::uint8_t*>(p);
  return a && q >= a && q < a + kArenaBytes;
}

std::size_t page_round(std::size_t n) { return (std::max<std::size_t>(n, 1) + page_size() - 1) & ~(page_size() - 1); }

void* allocate_pages(std::size_t n) {
  const std::size_t len = page_round(n);
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  lock_pages(p, len);
  (void)::madvise(p, len, MADV_DONTDUMP);
  SecretMemory& m = memory();
  std::lock_guard lock(m.pages_mu);
  m.pages.emplace(p, len);
  return p;
}

void free_pages(void* p, std::size_t n) noexcept {
  SecretMemory& m = memory();
  {
    std::lock_guard lock(m.pages_mu);
    m.pages.erase(p);
  }
  ::munmap(p, page_round(n));  // the pages are this block's alone: unmapping unlocks nothing else
}

}  // namespace

void secure_wipe(void* p, std::size_t n) {
  if (p && n) OPENSSL_cleanse(p, n);
}

void* allocate_secret(std::size_t n) {
  set_up();
  if (memory().arena && n <= kHeapMaxBlock) {
    // No file and line: a full arena is expected now and then and needs no OpenSSL error entry.
    if (void* p = CRYPTO_secure_malloc(std::max<std::size_t>(n, 1), nullptr, 0)) return p;
  }
  return allocate_pages(n);
}

void free_secret(void* p, std::size_t n) noexcept {
  if (!p) return;
  if (in_arena(p)) {
    CRYPTO_secure_clear_free(p, n, nullptr, 0);  // wipes the whole block, not only n bytes
    return;
  }
  secure_wipe(p, n);
  free_pages(p, n);
}

bool in_secure_heap(const void* p, std::size_t n) {
  return n > 0 && in_arena(p) && in_arena(static_cast<const std::uint8_t*>(p) + n - 1) &&
         CRYPTO_secure_allocated(p) == 1;
}

void SecretString::truncate(std::size_t n) {
  if (n >= bytes_.size()) return;
  secure_wipe(bytes_.data() + n, bytes_.size() - n);
  bytes_.resize(n);
}

bool SecretString::equals(const SecretString& o) const {
  return size() == o.size() && CRYPTO_memcmp(data(), o.data(), size()) == 0;
}

}  // namespace gcfs
