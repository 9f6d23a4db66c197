// fallocate keeps its promise (issue 19, item 2 of the issue): mode 0 and KEEP_SIZE reserve the
// backing space the range's chunks take once written, or fail up front with ENOSPC; the range
// reads as zeros; writes inside it take no new space and cannot fail for lack of it.
// ZERO_RANGE and PUNCH_HOLE make ranges read as zeros. ENOSPC is tried on a small tmpfs only.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

constexpr off_t kMiB = 1 << 20;

struct stat stat_of(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
  return st;
}

std::string pread_string(int fd, std::size_t len, off_t off) {
  std::string s(len, 'x');
  const ssize_t n = ::pread(fd, s.data(), len, off);
  s.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
  return s;
}

TEST(PosixFallocate, ReservesTheRangeAndWritesInsideTakeNoNewSpace) {
  MountedVault v;
  const int fd = ::open(v.path("f").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::fallocate(fd, 0, 0, kMiB), 0) << std::strerror(errno);
  struct stat st = stat_of(fd);
  EXPECT_EQ(st.st_size, kMiB);
  // 256 chunks of 4 KiB, each with its nonce and tag: more than 1 MiB on disk.
  EXPECT_GE(st.st_blocks * 512, kMiB + 256 * 28) << "the chunks' space is reserved";
  EXPECT_EQ(pread_string(fd, kMiB, 0), std::string(kMiB, '\0'));
  ASSERT_EQ(::pwrite(fd, "xy", 2, 300000), 2);
  ASSERT_EQ(::fsync(fd), 0);
  EXPECT_EQ(stat_of(fd).st_blocks, st.st_blocks) << "a write into the range took new space";
  EXPECT_EQ(pread_string(fd, 4, 299999), std::string("\0xy\0", 4));

  // KEEP_SIZE: reserved past the end, size unchanged, appends into it take no new space.
  const int k = ::open(v.path("k").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(k, 0);
  ASSERT_EQ(::fallocate(k, FALLOC_FL_KEEP_SIZE, 0, kMiB), 0) << std::strerror(errno);
  st = stat_of(k);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_GE(st.st_blocks * 512, kMiB);
  const std::string data(100000, 'd');
  ASSERT_EQ(::pwrite(k, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::fsync(k), 0);
  EXPECT_EQ(stat_of(k).st_blocks, st.st_blocks);
  // A truncate gives back what is reserved past the end, as on ext4.
  ASSERT_EQ(::ftruncate(k, static_cast<off_t>(data.size())), 0);
  EXPECT_LT(stat_of(k).st_blocks * 512, 200000) << "the reservation past the end was kept";
  ::close(k);
  ::close(fd);
  v.remount();
  EXPECT_EQ(read_file(v.path("f")).substr(299999, 4), std::string("\0xy\0", 4));
  EXPECT_EQ(read_file(v.path("k")), data);
}

TEST(PosixFallocate, ZeroRangeAndPunchHoleReadAsZeros) {
  MountedVault v;
  std::string data(20000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  write_file(v.path("z"), data);
  const int fd = ::open(v.path("z").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_ZERO_RANGE, 5000, 10000), 0) << std::strerror(errno);
  std::string want = data;
  std::fill(want.begin() + 5000, want.begin() + 15000, '\0');
  EXPECT_EQ(pread_string(fd, 30000, 0), want);
  // Past the end: the size grows, unless KEEP_SIZE.
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 20000, 10000), 0);
  EXPECT_EQ(stat_of(fd).st_size, 20000);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_ZERO_RANGE, 18000, 12000), 0);
  want.resize(30000, '\0');
  std::fill(want.begin() + 18000, want.end(), '\0');
  EXPECT_EQ(pread_string(fd, 40000, 0), want);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  std::fill(want.begin(), want.begin() + 4096, '\0');
  EXPECT_EQ(pread_string(fd, 40000, 0), want);
  EXPECT_EQ(::fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ::close(fd);
}

// A vault whose CIPHERDIR lies on a 24 MiB tmpfs.
class PosixFallocateSmallDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
    disk_ = std::make_unique<TempDir>("gcfs-small-disk");
    ASSERT_EQ(::mount("tmpfs", disk_->path().c_str(), "tmpfs", 0, "size=24m"), 0) << std::strerror(errno);
    mounted_ = true;
    const char* old = std::getenv("TMPDIR");
    old_tmpdir_ = old ? old : "";
    ::setenv("TMPDIR", disk_->path().c_str(), 1);
    v_ = std::make_unique<MountedVault>();
    if (old_tmpdir_.empty()) ::unsetenv("TMPDIR");
    else ::setenv("TMPDIR", old_tmpdir_.c_str(), 1);
  }
  void TearDown() override {
    v_.reset();
    if (mounted_) ::umount2(disk_->path().c_str(), MNT_DETACH);
  }
  std::uint64_t free_bytes() {
    struct statvfs sv {};
    ::statvfs(disk_->path().c_str(), &sv);
    return static_cast<std::uint64_t>(sv.f_bavail) * sv.f_frsize;
  }
  std::unique_ptr<TempDir> disk_;
  bool mounted_ = false;
  std::string old_tmpdir_;
  std::unique_ptr<MountedVault> v_;
};

TEST_F(PosixFallocateSmallDisk, FallocateBeyondTheFreeSpaceFailsUpFrontAndTakesNothing) {
  const int fd = ::open(v_->path("big").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const std::uint64_t before = free_bytes();
  EXPECT_EQ(::fallocate(fd, 0, 0, 64 * kMiB), -1);
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_EQ(::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 64 * kMiB), -1);
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_EQ(stat_of(fd).st_size, 0);
  EXPECT_GE(free_bytes() + 64 * 1024, before) << "a refused fallocate kept space";
  ::close(fd);
}

TEST_F(PosixFallocateSmallDisk, WritesIntoAReservedRangeSucceedOnAFullDisk) {
  const int fd = ::open(v_->path("db").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fallocate(fd, 0, 0, 4 * kMiB), 0) << std::strerror(errno);
  // Someone else fills the disk.
  const int filler = ::open(v_->path("filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(filler, 0);
  const std::string block(256 * 1024, 'f');
  bool full = false;
  for (int i = 0; i < 200 && !full; ++i)
    full = ::write(filler, block.data(), block.size()) < 0 || ::fsync(filler) != 0;
  ::close(filler);
  ASSERT_TRUE(full) << "the disk never filled up";
  // The reserved range takes its data all the same, in small writes spread over it.
  const std::string page(4096, 'p');
  for (off_t off = 0; off < 4 * kMiB; off += 64 * 1024)
    ASSERT_EQ(::pwrite(fd, page.data(), page.size(), off + 7), static_cast<ssize_t>(page.size()))
        << "at " << off << ": " << std::strerror(errno);
  ASSERT_EQ(::fsync(fd), 0) << std::strerror(errno);
  EXPECT_EQ(pread_string(fd, 4096, 64 * 1024 + 7), page);
  // Rewrites of those now durable chunks (their old bytes go to the crash journal first).
  const std::string again(4096, 'q');
  for (off_t off = 0; off < 4 * kMiB; off += 64 * 1024)
    ASSERT_EQ(::pwrite(fd, again.data(), again.size(), off + 7), static_cast<ssize_t>(again.size()))
        << "at " << off << ": " << std::strerror(errno);
  ASSERT_EQ(::fsync(fd), 0) << std::strerror(errno);
  EXPECT_EQ(pread_string(fd, 4096, 64 * 1024 + 7), again);
  ::close(fd);
}

}  // namespace
}  // namespace gcfs::test
