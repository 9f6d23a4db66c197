// Several writers on one file at once, through separate descriptors: records that share chunks
// (so each write is a read-modify-write of a chunk someone else is changing too) and appends.
// The per-chunk locks of the shared ContentFile must keep every byte of every writer.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

constexpr int kThreads = 4;

std::string record(int i, std::size_t len) {
  std::string r(len, static_cast<char>('a' + i % 26));
  std::string tag = std::to_string(i);
  r.replace(0, tag.size(), tag);
  return r;
}

TEST(Concurrency, InterleavedRecordsSharingChunks) {
  VaultOptions o;
  o.chunk_size = 4096;
  MountedVault v(o);
  const std::string p = v.path("shared");
  constexpr std::size_t kRecord = 1000;  // not a divisor of the chunk size: records straddle chunks
  constexpr int kRecords = 400;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int fd = ::open(p.c_str(), O_RDWR | O_CREAT, 0644);
      if (fd < 0) {
        ++failures[t];
        return;
      }
      for (int i = t; i < kRecords; i += kThreads) {
        std::string r = record(i, kRecord);
        if (::pwrite(fd, r.data(), r.size(), static_cast<off_t>(i) * kRecord) != static_cast<ssize_t>(r.size()))
          ++failures[t];
      }
      ::close(fd);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  std::string want;
  for (int i = 0; i < kRecords; ++i) want += record(i, kRecord);
  EXPECT_TRUE(read_file(p) == want);
  v.remount();
  EXPECT_TRUE(read_file(p) == want);
}

TEST(Concurrency, ConcurrentAppendsKeepEveryLine) {
  MountedVault v;
  const std::string p = v.path("appended");
  constexpr int kLines = 200;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);  // each thread's first failed call, with its errno
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd < 0) {
        failures[t] = std::string("open: ") + std::strerror(errno);
        return;
      }
      for (int i = 0; i < kLines; ++i) {
        std::string line = "thread " + std::to_string(t) + " line " + std::to_string(i) + " " +
                           std::string(static_cast<std::size_t>(i % 50) * 10, '.') + "\n";
        const ssize_t n = ::write(fd, line.data(), line.size());
        if (n != static_cast<ssize_t>(line.size()) && failures[t].empty())
          failures[t] = "write " + std::to_string(i) + ": " + (n < 0 ? std::strerror(errno) : "short");
      }
      if (::close(fd) != 0 && failures[t].empty()) failures[t] = std::string("close: ") + std::strerror(errno);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  auto r = v.sh("wc -l < appended; grep -c -v -E '^thread [0-9] line [0-9]+ \\.*$' appended; "
                "for t in 0 1 2 3; do grep -c \"^thread $t \" appended; done");
  EXPECT_EQ(r.output, std::to_string(kThreads * kLines) + "\n0\n200\n200\n200\n200\n") << r.output;
}

// O_DIRECT opens get parallel direct writes (mount/daemon/open_reply.h): the kernel then sends writes
// of one file to the daemon at once, and 4 KiB blocks of different writers share each chunk.
// Every block must hold its last writer's bytes, before and after a remount.
TEST(Concurrency, ParallelDirectWritesIntoSharedChunks) {
  MountedVault v;  // default chunks: 16 blocks of 4 KiB per chunk
  const std::string p = v.path("direct");
  constexpr std::size_t kBlock = 4096;
  constexpr int kBlocks = 64;
  write_file(p, std::string(kBlocks * kBlock, '.'));
  auto block = [](int b, int pass) {
    return std::string(kBlock, static_cast<char>('A' + (b * 7 + pass) % 26));
  };
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int fd = ::open(p.c_str(), O_RDWR | O_DIRECT);
      void* buf = std::aligned_alloc(kBlock, kBlock);
      if (fd < 0 || !buf) {
        ++failures[t];
        std::free(buf);
        return;
      }
      for (int pass = 0; pass < 3; ++pass)
        for (int b = t; b < kBlocks; b += kThreads) {
          std::memcpy(buf, block(b, pass).data(), kBlock);
          if (::pwrite(fd, buf, kBlock, static_cast<off_t>(b) * kBlock) != static_cast<ssize_t>(kBlock)) ++failures[t];
        }
      std::free(buf);
      ::close(fd);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  std::string want;
  for (int b = 0; b < kBlocks; ++b) want += block(b, 2);
  EXPECT_TRUE(read_file(p) == want);
  v.remount();
  EXPECT_TRUE(read_file(p) == want);
}

// A direct write through one handle is seen through a cached handle that read the same pages
// before, and a cached write is seen through a direct handle.
TEST(Concurrency, DirectAndCachedHandlesAgree) {
  MountedVault v;
  const std::string p = v.path("mixed");
  constexpr std::size_t kBlock = 4096;
  write_file(p, std::string(4 * kBlock, 'a'));
  int cached = ::open(p.c_str(), O_RDWR);
  int direct = ::open(p.c_str(), O_RDWR | O_DIRECT);
  ASSERT_GE(cached, 0);
  ASSERT_GE(direct, 0);
  std::string got(kBlock, '\0');
  ASSERT_EQ(::pread(cached, got.data(), kBlock, kBlock), static_cast<ssize_t>(kBlock));  // now in the page cache
  EXPECT_EQ(got, std::string(kBlock, 'a'));
  void* buf = std::aligned_alloc(kBlock, kBlock);
  ASSERT_NE(buf, nullptr);
  std::memset(buf, 'd', kBlock);
  ASSERT_EQ(::pwrite(direct, buf, kBlock, kBlock), static_cast<ssize_t>(kBlock));
  ASSERT_EQ(::pread(cached, got.data(), kBlock, kBlock), static_cast<ssize_t>(kBlock));
  EXPECT_EQ(got, std::string(kBlock, 'd')) << "a cached handle kept stale pages over a direct write";
  const std::string c(kBlock, 'c');
  ASSERT_EQ(::pwrite(cached, c.data(), kBlock, 2 * kBlock), static_cast<ssize_t>(kBlock));
  ASSERT_EQ(::pread(direct, buf, kBlock, 2 * kBlock), static_cast<ssize_t>(kBlock));
  EXPECT_EQ(std::string(static_cast<char*>(buf), kBlock), c) << "a direct read missed a cached write";
  std::free(buf);
  ::close(direct);
  ::close(cached);
  EXPECT_EQ(read_file(p), std::string(kBlock, 'a') + std::string(kBlock, 'd') + c + std::string(kBlock, 'a'));
}

// A write-only open writes around the page cache (mount/daemon/open_reply.h, where the kernel keeps
// other handles coherent): a handle that read the pages before sees the new bytes, writes of any
// size and alignment work, and the pages written are not left in the page cache.
TEST(Concurrency, WriteOnlyHandlesWriteAroundThePageCacheAndReadersSeeTheirBytes) {
  MountedVault v;
  const std::string p = v.path("written");
  constexpr std::size_t kBlock = 4096;
  write_file(p, std::string(8 * kBlock, 'a'));
  int reader = ::open(p.c_str(), O_RDONLY);
  int writer = ::open(p.c_str(), O_WRONLY);
  ASSERT_GE(reader, 0);
  ASSERT_GE(writer, 0);
  std::string got(kBlock, '\0');
  ASSERT_EQ(::pread(reader, got.data(), kBlock, kBlock), static_cast<ssize_t>(kBlock));  // now in the page cache
  EXPECT_EQ(got, std::string(kBlock, 'a'));
  const std::string w(kBlock, 'w'), small(100, 's');
  ASSERT_EQ(::pwrite(writer, w.data(), kBlock, kBlock), static_cast<ssize_t>(kBlock));
  ASSERT_EQ(::pwrite(writer, w.data(), kBlock, 4 * kBlock), static_cast<ssize_t>(kBlock));
  ASSERT_EQ(::pwrite(writer, small.data() + 1, small.size() - 1, 6 * kBlock + 10), static_cast<ssize_t>(small.size() - 1));
  if (v.log().find("write-only opens with direct I/O") != std::string::npos) {
    // Block 4, written whole and never read, is not in the page cache: a cached write leaves it
    // there (until a read finds the file's times changed and drops them all, hence before the read).
    void* map = ::mmap(nullptr, 8 * kBlock, PROT_READ, MAP_SHARED, reader, 0);
    ASSERT_NE(map, MAP_FAILED);
    unsigned char resident[8] = {};
    ASSERT_EQ(::mincore(map, 8 * kBlock, resident), 0);
    EXPECT_EQ(resident[4] & 1, 0) << "a write-only handle's write went through the page cache";
    ::munmap(map, 8 * kBlock);
  }
  ASSERT_EQ(::pread(reader, got.data(), kBlock, kBlock), static_cast<ssize_t>(kBlock));
  EXPECT_EQ(got, w) << "a reading handle kept stale pages over a write-only handle's write";
  ::close(writer);
  ::close(reader);
  std::string want = std::string(8 * kBlock, 'a');
  want.replace(kBlock, kBlock, w);
  want.replace(4 * kBlock, kBlock, w);
  want.replace(6 * kBlock + 10, small.size() - 1, small.substr(1));
  EXPECT_TRUE(read_file(p) == want);
  v.remount();
  EXPECT_TRUE(read_file(p) == want);
}

// A stat of an open file by its path is answered from the file's open content, which the daemon
// holds for the call. Once the kernel has the answer, the caller may close and remove the file at
// once: the kernel then sends RELEASE and FORGET, served by other threads, and the inode goes. The
// daemon once let go of the content only after answering, on an inode that could be gone by then
// (a use-after-free that corrupted the heap, seen as a crash in `git gc`; TSan reports it on the
// first iterations here, the scripts/sanitize.sh thread stage runs this test).
TEST(Concurrency, AStatOfAnOpenFileRacingItsCloseAndRemovalLeavesTheDaemonWhole) {
  MountedVault v;
  constexpr int kRounds = 1500;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string p = v.path("racing" + std::to_string(t));
      for (int i = 0; i < kRounds && failures[t].empty(); ++i) {
        const int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
          failures[t] = "open: " + std::string(std::strerror(errno));
          break;
        }
        struct statx sx {};
        const bool written = ::write(fd, "x", 1) == 1;
        // Past the kernel's cached attributes: a GETATTR without a handle, while the file is open.
        const int rc = ::statx(AT_FDCWD, p.c_str(), AT_STATX_FORCE_SYNC, STATX_SIZE, &sx);
        ::close(fd);
        if (!written || rc != 0 || sx.stx_size != 1) failures[t] = "round " + std::to_string(i) + ": write or stat failed";
        if (::unlink(p.c_str()) != 0) failures[t] = "unlink: " + std::string(std::strerror(errno));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  ASSERT_TRUE(v.mounted());
  write_file(v.path("after"), "still serving");
  EXPECT_EQ(read_file(v.path("after")), "still serving");
}

// READs and WRITEs are answered outside libfuse (mount/transport/session_io.h), which therefore never
// hears of them: an INTERRUPT that the kernel sends for one (its caller got a signal while it
// waited) finds nothing to interrupt. Signals rain on threads doing buffered reads (the cache
// dropped first, readahead off: each read waits on a READ it sent itself, interruptibly) and
// writes (the kernel sent the daemon about 900 INTERRUPTs in a run here over /dev/fuse, about 50
// over io_uring); every call completes whole (or fails with EINTR), the bytes read are the
// file's, and the daemon goes on serving.
TEST(Concurrency, SignalsDuringDirectReadsAndWritesLeaveEveryCallWholeAndTheDaemonServing) {
  MountedVault v;
  constexpr std::size_t kBlock = 1 << 20;
  const std::string p = v.path("interrupted");
  std::string want(4 * kBlock, '\0');
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<char>('a' + (i / 4096) % 26);
  write_file(p, want);
  struct sigaction sa {};
  sa.sa_handler = [](int) {};  // no SA_RESTART
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::vector<std::string> failures(kThreads);
  std::vector<pthread_t> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ids[t] = ::pthread_self();
      ++started;
      const int fd = ::open(p.c_str(), O_RDWR);
      void* buf = nullptr;
      if (fd < 0 || ::posix_memalign(&buf, 4096, kBlock) != 0) {
        failures[t] = "open";
        return;
      }
      (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
      for (int i = 0; !stop && failures[t].empty(); ++i) {
        const off_t at = static_cast<off_t>((i + t) % 4) * kBlock;
        if (t % 2 == 0) {
          (void)::posix_fadvise(fd, at, kBlock, POSIX_FADV_DONTNEED);
          const ssize_t n = ::pread(fd, buf, kBlock, at);
          if (n < 0 && errno != EINTR) failures[t] = std::string("read: ") + std::strerror(errno);
          if (n > 0 && std::memcmp(buf, want.data() + at, static_cast<std::size_t>(n)) != 0) failures[t] = "wrong bytes";
        } else {
          std::memcpy(buf, want.data() + at, kBlock);  // the bytes already there: the file never changes
          const ssize_t n = ::pwrite(fd, buf, kBlock, at);
          if (n < 0 && errno != EINTR) failures[t] = std::string("write: ") + std::strerror(errno);
        }
      }
      std::free(buf);
      ::close(fd);
    });
  }
  while (started < kThreads) std::this_thread::yield();
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < end) {
    for (int t = 0; t < kThreads; ++t) ::pthread_kill(ids[t], SIGUSR1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stop = true;
  for (auto& th : threads) th.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  ASSERT_TRUE(v.mounted());
  EXPECT_TRUE(read_file(p) == want);
  write_file(v.path("after"), "still serving");
  EXPECT_EQ(read_file(v.path("after")), "still serving");
}

}  // namespace
}  // namespace gcfs::test
