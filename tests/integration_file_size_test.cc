// How a file's size changes on a mounted vault when something else changes it at the same time,
// or when its ciphertext ends in an incomplete chunk (issue 18, findings 3 and 8).
//
// fallocate racing the kernel's writeback: under the writeback cache the kernel answers a pwrite
// from its page cache and sends the pages later, while FALLOCATE goes to the daemon at once: the
// daemon may see the file grow by a writeback WRITE between reading the size and extending it. An
// extension computed from the old size then cut the file back and dropped the page just written,
// although fsync returned 0. After every fsync the ciphertext must hold exactly what was written
// (the kernel keeps its own size under the writeback cache, so the ciphertext is where a lost page
// shows), and a fresh mount must read every byte.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

constexpr std::uint64_t kChunk = 64 * 1024;
constexpr std::uint64_t kSize = 4 * 1024 * 1024;       // 64 whole chunks
constexpr std::uint64_t kFallocEnd = kSize - 4096;     // inside the last chunk, short of the end
constexpr int kMaxRounds = 200;
constexpr auto kMaxTime = std::chrono::seconds(20);

// docs/FORMAT.md "File contents": a 24-byte header, then per chunk a 12-byte nonce and a 16-byte tag.
// The ciphertext size of a file of `plain` bytes in the test vaults' format (docs/FORMAT.md).
std::uint64_t cipher_size(std::uint64_t plain) {
  if (test_format() == 2) {
    if (plain == 0) return 0;
    if (plain <= 3968) return 128 + plain;
    const std::uint64_t last = (plain - 1) / kChunk, g = last / 128, i = last % 128;
    return 4096 * (g + 1) + (128 * g + i) * kChunk + (plain - last * kChunk);
  }
  const std::uint64_t full = plain / kChunk, rem = plain % kChunk;
  return 24 + full * (kChunk + 28) + (rem ? rem + 28 : 0);
}

// The content files in CIPHERDIR's root (everything else there is the vault's own gpucryptfs.*).
std::vector<std::string> all_ciphertext_files(const std::string& cipherdir) {
  std::vector<std::string> found;
  DIR* d = ::opendir(cipherdir.c_str());
  if (!d) return found;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name.rfind("gpucryptfs.", 0) == 0) continue;
    found.push_back(cipherdir + "/" + name);
  }
  ::closedir(d);
  return found;
}

std::int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}

TEST(FallocateRace, ExtendingDuringWritebackNeverShrinksFsyncedData) {
  VaultOptions o;
  o.chunk_size = static_cast<unsigned>(kChunk);
  // The race needs the kernel's writeback cache: drop a suite-wide opt-out and ask for it.
  o.mount_args.erase(std::remove(o.mount_args.begin(), o.mount_args.end(), "--no-writeback-cache"),
                     o.mount_args.end());
  if (std::find(o.mount_args.begin(), o.mount_args.end(), "--writeback-cache") == o.mount_args.end())
    o.mount_args.push_back("--writeback-cache");
  MountedVault v(o);
  const std::string p = v.path("raced");
  const int fd = ::open(p.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const int fd2 = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd2, 0) << std::strerror(errno);
  const auto files = all_ciphertext_files(v.cipherdir());
  ASSERT_EQ(files.size(), 1u) << "want one ciphertext file in " << v.cipherdir();
  const std::string cipher = files[0];

  std::string data(kSize, '\0');
  for (std::uint64_t i = 0; i < kSize; ++i) data[i] = static_cast<char>('a' + (i / 4096 + i) % 26);

  // The second thread extends the file once per round, while the first thread's pages are on
  // their way to the daemon.
  std::atomic<int> go{-1}, done{-1};
  std::atomic<bool> stop{false};
  std::atomic<int> falloc_errors{0};
  std::thread extender([&] {
    for (int seen = -1; !stop.load();) {
      const int r = go.load();
      if (r == seen) {
        std::this_thread::yield();
        continue;
      }
      seen = r;
      // A delay that varies from round to round (0 to 1.9 ms) lands the fallocate at every stage
      // of the writeback: without it the window is hit a few times in 200 rounds, with it dozens.
      std::this_thread::sleep_for(std::chrono::microseconds((r % 20) * 100));
      if (::fallocate(fd2, 0, 0, static_cast<off_t>(kFallocEnd)) != 0) ++falloc_errors;
      done.store(r);
    }
  });

  const auto deadline = std::chrono::steady_clock::now() + kMaxTime;
  int rounds = 0, short_rounds = 0;
  std::string first_short;
  for (; rounds < kMaxRounds && std::chrono::steady_clock::now() < deadline; ++rounds) {
    ASSERT_EQ(::ftruncate(fd, 0), 0) << std::strerror(errno);
    ASSERT_EQ(::pwrite(fd, data.data(), kSize, 0), static_cast<ssize_t>(kSize)) << std::strerror(errno);
    go.store(rounds);
    ASSERT_EQ(::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE), 0) << std::strerror(errno);
    while (done.load() != rounds) std::this_thread::yield();
    ASSERT_EQ(::fsync(fd), 0) << std::strerror(errno);
    const std::int64_t got = file_size(cipher);
    if (got != static_cast<std::int64_t>(cipher_size(kSize))) {
      if (short_rounds++ == 0)
        first_short = "round " + std::to_string(rounds) + ": ciphertext " + std::to_string(got) + " bytes, want " +
                      std::to_string(cipher_size(kSize));
    }
  }
  stop.store(true);
  extender.join();
  ::close(fd2);
  ::close(fd);
  EXPECT_EQ(falloc_errors.load(), 0);
  EXPECT_EQ(short_rounds, 0) << short_rounds << " of " << rounds << " rounds lost fsynced bytes; first: " << first_short;
  std::cerr << "[fallocate race] " << rounds << " rounds, " << short_rounds << " short\n";

  // What a fresh mount sees: every byte of the last round.
  v.remount();
  const std::string back = read_file(p);
  EXPECT_EQ(back.size(), kSize);
  EXPECT_TRUE(back == data) << "contents differ after remount";
}

// A file whose ciphertext ends in an incomplete chunk (shorter than a nonce and tag: what an
// append cut short between pages leaves) reads as its whole chunks; growing it by truncate,
// fallocate or a write past the end reads as zeros past them (docs/FORMAT.md "Sizes"), not EIO.
TEST(IncompleteLastChunk, GrowingTheFileReadsAsZerosPastTheWholeChunks) {
  VaultOptions o;
  o.chunk_size = static_cast<unsigned>(kChunk);
  MountedVault v(o);
  // Format 1: 13 bytes of a third chunk (less than its nonce and tag). Format 2: 13 bytes into the
  // metadata block of a second group (its entries landed, its data did not).
  const bool v2 = test_format() == 2;
  const std::string data((v2 ? 128 : 2) * kChunk, 's');
  for (const char* name : {"by-truncate", "by-fallocate", "by-write"}) write_file(v.path(name), data + "tail");
  v.unmount();
  for (const auto& f : all_ciphertext_files(v.cipherdir()))
    ASSERT_EQ(::truncate(f.c_str(), static_cast<off_t>(cipher_size(data.size()) + 13)), 0) << f;
  v.mount();
  const std::string grown = data + std::string(kChunk / 2, '\0');
  ASSERT_EQ(::truncate(v.path("by-truncate").c_str(), static_cast<off_t>(grown.size())), 0) << std::strerror(errno);
  {
    const int fd = ::open(v.path("by-fallocate").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::fallocate(fd, 0, 0, static_cast<off_t>(grown.size())), 0) << std::strerror(errno);
    ::close(fd);
  }
  {
    const int fd = ::open(v.path("by-write").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::pwrite(fd, "end", 3, static_cast<off_t>(grown.size())), 3) << std::strerror(errno);
    EXPECT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  for (int pass = 0; pass < 2; ++pass) {  // through this mount, then a fresh one
    SCOPED_TRACE(pass ? "after remount" : "same mount");
    EXPECT_TRUE(read_file(v.path("by-truncate")) == grown);
    EXPECT_TRUE(read_file(v.path("by-fallocate")) == grown);
    EXPECT_TRUE(read_file(v.path("by-write")) == grown + "end");
    if (pass == 0) v.remount();
  }
}

}  // namespace
}  // namespace gcfs::test
