// Secret memory (crypto/secret.h): small secrets come from OpenSSL's secure heap, large ones from
// pages of their own; freeing one secret never unlocks the page of another, and a forked child
// (which inherits no memory locks) locks them again. SecretString keeps passwords out of
// std::string and wipes what it drops.
#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crypto/secret.h"

namespace gcfs {
namespace {

// Whether the mapping that holds p is locked (mlock), as the kernel reports it: the "lo" flag
// of its VmFlags in /proc/self/smaps. mlock and munlock split mappings at page boundaries, so
// this is the state of p's own page.
bool page_locked(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return (line + " ").find(" lo ") != std::string::npos;
  }
  return false;
}

std::uintptr_t page_of(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) & ~static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE) - 1);
}

// Root (CAP_IPC_LOCK) or a memlock limit above what these tests lock; elsewhere locking is best
// effort by design, and the tests that check it are skipped rather than failed.
bool can_lock() {
  rlimit r{};
  return ::geteuid() == 0 || (::getrlimit(RLIMIT_MEMLOCK, &r) == 0 && r.rlim_cur >= (4u << 20));
}

SecretBytes filled(std::size_t n, std::uint8_t v) { return SecretBytes(n, v); }

TEST(SecretMemory, SmallSecretsComeFromTheSecureHeap) {
  const SecretBytes key = filled(32, 0xa5);
  EXPECT_TRUE(in_secure_heap(key.data(), key.size()));
  EXPECT_EQ(CRYPTO_secure_allocated(key.data()), 1);
  EXPECT_EQ(key[31], 0xa5);
}

TEST(SecretMemory, FreeingOneSecretLeavesItsNeighboursPageLocked) {
  if (!can_lock()) GTEST_SKIP() << "RLIMIT_MEMLOCK too small for mlock";
  // Allocate until two live secrets share a page (the first two do, in the secure heap).
  std::vector<std::unique_ptr<SecretBytes>> keys;
  std::size_t a = 0, b = 0;
  for (bool found = false; !found && keys.size() < 64;) {
    keys.push_back(std::make_unique<SecretBytes>(filled(32, 0x5a)));
    for (std::size_t i = 0; i + 1 < keys.size() && !found; ++i)
      if (page_of(keys[i]->data()) == page_of(keys.back()->data())) a = i, b = keys.size() - 1, found = true;
  }
  ASSERT_NE(a, b) << "no two secrets on one page";
  ASSERT_TRUE(page_locked(keys[a]->data()));
  ASSERT_TRUE(page_locked(keys[b]->data()));
  keys[a].reset();
  EXPECT_TRUE(page_locked(keys[b]->data())) << "freeing one secret unlocked the page of another";
  EXPECT_EQ((*keys[b])[0], 0x5a);
}

TEST(SecretMemory, LargeSecretsGetLockedPagesOfTheirOwn) {
  const SecretBytes small = filled(32, 1);
  SecretBytes big = filled(64 * 1024, 2);  // the size of a gpu key schedule
  EXPECT_FALSE(in_secure_heap(big.data(), big.size()));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.data()) % ::sysconf(_SC_PAGESIZE), 0u);
  if (can_lock()) {
    EXPECT_TRUE(page_locked(big.data()));
    EXPECT_TRUE(page_locked(big.data() + big.size() - 1));
  }
  const std::uint8_t* small_page = small.data();
  big = SecretBytes();  // unmapped; the small secret's page is another mapping
  if (can_lock()) {
    EXPECT_TRUE(page_locked(small_page));
  }
}

TEST(SecretMemory, AForkedChildLocksTheSecretsAgain) {
  if (!can_lock()) GTEST_SKIP() << "RLIMIT_MEMLOCK too small for mlock";
  const SecretBytes small = filled(32, 3);
  const SecretBytes big = filled(64 * 1024, 4);
  ASSERT_TRUE(page_locked(small.data()));
  ASSERT_TRUE(page_locked(big.data()));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // fork() drops the locks; the child's own new secrets must be locked too
    const SecretBytes fresh_small = filled(32, 5);
    const SecretBytes fresh_big = filled(64 * 1024, 6);
    int bits = 0;
    bits |= page_locked(small.data()) ? 0 : 1;
    bits |= page_locked(big.data()) ? 0 : 2;
    bits |= page_locked(fresh_small.data()) ? 0 : 4;
    bits |= page_locked(fresh_big.data()) ? 0 : 8;
    ::_exit(bits);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "unlocked in the child (1: old small, 2: old big, 4: new small, 8: new big)";
}

TEST(SecretString, HoldsTextInSecretMemoryAndMovesWithoutCopies) {
  SecretString s("correct horse");
  EXPECT_EQ(s.view(), "correct horse");
  EXPECT_TRUE(in_secure_heap(s.data(), s.size()));
  const char* block = s.data();
  SecretString moved = std::move(s);
  EXPECT_EQ(moved.data(), block);  // the block moved; no second copy of the text exists
  EXPECT_TRUE(s.empty());          // NOLINT(bugprone-use-after-move): a moved-from SecretString is empty
}

TEST(SecretString, TruncateWipesWhatItDrops) {
  SecretString s("hunter2\r");
  const char* p = s.data();
  s.truncate(3);
  EXPECT_EQ(s.view(), "hun");
  ASSERT_EQ(s.data(), p);  // same block: the dropped bytes are still ours to look at
  for (int i = 3; i < 8; ++i) EXPECT_EQ(p[i], 0) << "byte " << i;
  s.pop_back();
  EXPECT_EQ(s.view(), "hu");
  EXPECT_EQ(p[2], 0);
  s.clear();
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(p[0], 0);
}

TEST(SecretString, EqualsComparesContentsAndLength) {
  EXPECT_TRUE(SecretString("abc").equals(SecretString("abc")));
  EXPECT_FALSE(SecretString("abc").equals(SecretString("abd")));
  EXPECT_FALSE(SecretString("abc").equals(SecretString("abcd")));
  EXPECT_TRUE(SecretString().equals(SecretString()));
}

}  // namespace
}  // namespace gcfs
