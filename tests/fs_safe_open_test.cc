// open_beneath and read_capped against every shape a hostile CIPHERDIR can hold where the vault
// expects its own file: FIFO, socket, directory, symlinks inside and outside, device node, a
// huge sparse file, ".." and absolute paths. Each case must answer at once with what it found.
#include "fs/safe_open.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include <gtest/gtest.h>

namespace fs = std::filesystem;
using namespace gcfs;

namespace {

class SafeOpen : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("safe_open_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_ / "vault" / "sub");
    fs::create_directories(base_ / "outside");
    write(base_ / "outside" / "secret", "outside data");
    write(base_ / "vault" / "sub" / "file", "inside data");
    dirfd_ = ::open((base_ / "vault").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dirfd_, 0);
  }
  void TearDown() override {
    ::close(dirfd_);
    fs::remove_all(base_);
  }
  static void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }
  // Runs the open with a deadline: a hang is the failure this file exists to catch.
  OpenResult open_quickly(const std::string& rel, FileType type, int flags, mode_t mode = 0) {
    auto fut = std::async(std::launch::async, [&] { return open_beneath(dirfd_, rel, type, flags, mode); });
    if (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << rel << ": open_beneath blocked";
      std::abort();  // the thread cannot be cancelled; better a clear crash than a stuck test
    }
    return fut.get();
  }
  fs::path base_;
  int dirfd_ = -1;
};

TEST_F(SafeOpen, OpensARegularFileBeneath) {
  OpenResult r = open_quickly("sub/file", FileType::Regular, O_RDONLY);
  ASSERT_TRUE(r) << r.why();
  std::vector<std::uint8_t> data;
  ASSERT_EQ(read_capped(r.fd.get(), 100, &data), 0);
  EXPECT_EQ(std::string(data.begin(), data.end()), "inside data");
  EXPECT_EQ(::fcntl(r.fd.get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST_F(SafeOpen, FifoIsReportedNotOpened) {
  ASSERT_EQ(::mkfifo((base_ / "vault" / "fifo").c_str(), 0600), 0);
  for (int flags : {O_RDONLY, O_WRONLY, O_RDWR, O_RDWR | O_CREAT}) {
    OpenResult r = open_quickly("fifo", FileType::Regular, flags, 0600);
    EXPECT_FALSE(r);
    EXPECT_EQ(r.error, EUCLEAN);
    EXPECT_EQ(r.found_type, static_cast<mode_t>(S_IFIFO));
    EXPECT_NE(r.why().find("FIFO"), std::string::npos) << r.why();
  }
}

TEST_F(SafeOpen, SocketAndDeviceAreReported) {
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sp = (base_ / "vault" / "sock").string();
  ASSERT_LT(sp.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sp.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  OpenResult r = open_quickly("sock", FileType::Regular, O_RDONLY);
  EXPECT_EQ(r.error, EUCLEAN);
  EXPECT_EQ(r.found_type, static_cast<mode_t>(S_IFSOCK));
  ::close(s);
  // /dev/zero's numbers: a device node is looked at, never opened.
  if (::mknod((base_ / "vault" / "dev").c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0) {
    OpenResult d = open_quickly("dev", FileType::Regular, O_RDONLY);
    EXPECT_EQ(d.error, EUCLEAN);
    EXPECT_EQ(d.found_type, static_cast<mode_t>(S_IFCHR));
  }
}

TEST_F(SafeOpen, DirectoryWhereAFileBelongsAndTheReverse) {
  OpenResult r = open_quickly("sub", FileType::Regular, O_RDONLY);
  EXPECT_EQ(r.error, EUCLEAN);
  EXPECT_EQ(r.found_type, static_cast<mode_t>(S_IFDIR));
  OpenResult d = open_quickly("sub/file", FileType::Directory, O_RDONLY);
  EXPECT_EQ(d.error, EUCLEAN);
  OpenResult ok = open_quickly("sub", FileType::Directory, O_RDONLY);
  ASSERT_TRUE(ok) << ok.why();
  struct stat st {};
  ASSERT_EQ(::fstat(ok.fd.get(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST_F(SafeOpen, SymlinksAreNeverFollowedInsideOrOutside) {
  fs::create_symlink(base_ / "outside" / "secret", base_ / "vault" / "abs_link");
  fs::create_symlink("sub/file", base_ / "vault" / "rel_link");
  fs::create_directory_symlink(base_ / "outside", base_ / "vault" / "dir_link");
  fs::create_directory_symlink("sub", base_ / "vault" / "inner_dir_link");
  for (const char* p : {"abs_link", "rel_link", "dir_link/secret", "inner_dir_link/file"}) {
    OpenResult r = open_quickly(p, FileType::Regular, O_RDONLY);
    EXPECT_FALSE(r) << p;
    EXPECT_EQ(r.error, ELOOP) << p << ": " << r.why();
  }
  // Creating through a link must not create outside either.
  OpenResult c = open_quickly("dir_link/new", FileType::Regular, O_WRONLY | O_CREAT, 0600);
  EXPECT_FALSE(c);
  EXPECT_FALSE(fs::exists(base_ / "outside" / "new"));
  OpenResult w = open_quickly("abs_link", FileType::Regular, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT_FALSE(w);
  std::ifstream in(base_ / "outside" / "secret");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "outside data");
}

TEST_F(SafeOpen, PathsThatLeaveAreRefused) {
  for (const char* p : {"../outside/secret", "sub/../../outside/secret", "/etc/passwd", "", "sub//file", "./sub/file"}) {
    OpenResult r = open_quickly(p, FileType::Regular, O_RDONLY);
    EXPECT_FALSE(r) << p;
    EXPECT_EQ(r.error, EXDEV) << p;
  }
  EXPECT_TRUE(is_plain_relative_path("a/b/c"));
  EXPECT_FALSE(is_plain_relative_path("a/../c"));
  EXPECT_FALSE(is_plain_relative_path("a/"));
}

TEST_F(SafeOpen, CreatesWithExclusiveSemantics) {
  OpenResult r = open_quickly("sub/new", FileType::Regular, O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(r) << r.why();
  EXPECT_EQ(::pwrite(r.fd.get(), "x", 1, 0), 1);
  OpenResult again = open_quickly("sub/new", FileType::Regular, O_RDWR | O_CREAT | O_EXCL, 0600);
  EXPECT_EQ(again.error, EEXIST);
  OpenResult reuse = open_quickly("sub/new", FileType::Regular, O_RDWR | O_CREAT, 0600);
  EXPECT_TRUE(reuse) << reuse.why();
}

TEST_F(SafeOpen, OpenRegularFollowsLinksButNeverBlocksOnAFifo) {
  ASSERT_EQ(::mkfifo((base_ / "vault" / "fifo").c_str(), 0600), 0);
  for (int flags : {O_RDONLY, O_RDWR}) {
    auto fut = std::async(std::launch::async, [&] { return open_regular((base_ / "vault" / "fifo").string(), flags); });
    ASSERT_EQ(fut.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "open_regular blocked";
    OpenResult r = fut.get();
    EXPECT_EQ(r.error, EUCLEAN);
    EXPECT_EQ(r.found_type, static_cast<mode_t>(S_IFIFO));
  }
  EXPECT_EQ(open_regular((base_ / "vault" / "sub").string(), O_RDONLY).error, EUCLEAN);
  fs::create_symlink(base_ / "vault" / "sub" / "file", base_ / "link");
  OpenResult ok = open_regular((base_ / "link").string(), O_RDONLY);
  ASSERT_TRUE(ok) << ok.why();
  EXPECT_EQ(::fcntl(ok.fd.get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST_F(SafeOpen, ReopenRegularOpensOnlyARegularFileWhateverStatDecides) {
  ASSERT_EQ(::mkfifo((base_ / "vault" / "fifo").c_str(), 0600), 0);
  const int file = ::openat(dirfd_, "sub/file", O_PATH | O_NOFOLLOW | O_CLOEXEC);
  const int fifo = ::openat(dirfd_, "fifo", O_PATH | O_NOFOLLOW | O_CLOEXEC);
  ASSERT_GE(file, 0);
  ASSERT_GE(fifo, 0);
  struct stat file_st {}, fifo_st {};
  ASSERT_EQ(::fstat(file, &file_st), 0);
  ASSERT_EQ(::fstat(fifo, &fifo_st), 0);
  // Its own fstat, or the caller's of the same descriptor (taken as it was opened): either way
  // the type decides.
  for (bool known : {false, true}) {
    SCOPED_TRACE(known ? "the caller's stat" : "its own fstat");
    auto reopen = [&](int fd, const struct stat* st) {
      auto fut = std::async(std::launch::async, [&] { return reopen_regular(fd, O_RDWR, known ? st : nullptr); });
      if (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
        ADD_FAILURE() << "reopen_regular blocked";
        std::abort();
      }
      return fut.get();
    };
    OpenResult r = reopen(file, &file_st);
    ASSERT_TRUE(r) << r.why();
    std::vector<std::uint8_t> data;
    ASSERT_EQ(read_capped(r.fd.get(), 100, &data), 0);
    EXPECT_EQ(std::string(data.begin(), data.end()), "inside data");
    OpenResult f = reopen(fifo, &fifo_st);  // a FIFO is looked at, never opened
    EXPECT_FALSE(f);
    EXPECT_EQ(f.error, EUCLEAN);
    EXPECT_EQ(f.found_type, static_cast<mode_t>(S_IFIFO));
  }
  ::close(file);
  ::close(fifo);
}

TEST_F(SafeOpen, ReadCappedRefusesHugeSparseFiles) {
  {
    std::ofstream(base_ / "vault" / "huge");
  }
  fs::resize_file(base_ / "vault" / "huge", std::uintmax_t{1} << 40);  // 1 TiB, no blocks
  OpenResult r = open_quickly("huge", FileType::Regular, O_RDONLY);
  ASSERT_TRUE(r) << r.why();
  std::vector<std::uint8_t> data;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(read_capped(r.fd.get(), 4096, &data), -EFBIG);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_TRUE(data.empty());
}

}  // namespace
