// ContentFile on a full disk and at the filesystem's size limit: ENOSPC keeps what was written,
// a failed write halfway through its parts is put back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "crypto/aes_gcm.h"
#include "crypto/cpu_engine.h"
#include "crypto/kdf.h"
#include "crypto/key_ring.h"
#include "fs/backing_io.h"
#include "fs/chunk_journal.h"
#include "fs/chunk_layout.h"
#include "fs/content/content_file.h"
#include "fs/file_header.h"
#include "fs/log.h"

#include "tests/support/content_file_fixture.h"

namespace gcfs {
namespace {

using namespace content_test;

// ------------------------------------------------------------------------- full disk

class SmallTmpfs {
 public:
  explicit SmallTmpfs(const std::string& where) : path_(where + "/mnt") {
    ::mkdir(path_.c_str(), 0700);
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, "size=1m") == 0) {
      mounted_ = true;
    } else {
      why_ = std::string("cannot mount a tmpfs: ") + std::strerror(errno);
    }
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool mounted_ = false;
  std::string why_;
};

// Fills the filesystem with a plain file until a write fails.
void fill_up(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  const Bytes block(4096, 0xAB);
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  Bytes one(1, 0xAB);
  while (::write(fd, one.data(), 1) > 0) {
  }
  ::close(fd);
}

TEST_F(ContentFileTest, FullDiskGivesEnospcAndKeepsEarlierData) {
  SmallTmpfs fs(dir.path());
  if (!fs.mounted()) GTEST_SKIP() << fs.why() << " (needs root or CAP_SYS_ADMIN)";
  const std::uint32_t C = 4096;
  Backing b(fs.path() + "/victim", C);
  const Bytes data = pattern(100 * 1024 + 123, 8);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  fill_up(fs.path() + "/filler");

  const Bytes more = pattern(256 * 1024, 9);
  // Appending: no room for the new chunks.
  EXPECT_EQ(b.file->write(data.size(), more.data(), more.size()), -ENOSPC);
  // Rewriting the partial last chunk and growing past it.
  EXPECT_EQ(b.file->write(data.size() - 10, more.data(), more.size()), -ENOSPC);
  EXPECT_EQ(b.file->plain_size(), static_cast<std::int64_t>(data.size()));
  EXPECT_EQ(b.disk_size(), b.layout.cipher_size(data.size()));
  EXPECT_EQ(b.read_all(*b.file), data);
  EXPECT_EQ(b.read_all(b.reopen()), data);

  // A write past the end: the gap would be holes (no space), the data cannot be stored. The
  // failed write must not leave the file longer than it was.
  EXPECT_EQ(b.file->write(data.size() + 10 * C, more.data(), more.size()), -ENOSPC);
  EXPECT_EQ(b.file->plain_size(), static_cast<std::int64_t>(data.size()));
  EXPECT_EQ(b.disk_size(), b.layout.cipher_size(data.size()));
  const Bytes aligned = pattern(C, 13);
  Backing even(fs.path() + "/even", C);
  ::unlink((fs.path() + "/filler").c_str());
  ASSERT_EQ(even.file->write(0, aligned.data(), aligned.size()), static_cast<ssize_t>(C));
  fill_up(fs.path() + "/filler");
  EXPECT_EQ(even.file->write(5 * C + 1, more.data(), more.size()), -ENOSPC);
  EXPECT_EQ(even.file->plain_size(), static_cast<std::int64_t>(C));
  EXPECT_EQ(even.read_all(even.reopen()), aligned);

  // In-place rewrites need no new space and still work on the full disk.
  const Bytes patch = pattern(3 * C, 10);
  ASSERT_EQ(b.file->write(C / 2, patch.data(), patch.size()), static_cast<ssize_t>(patch.size()));
  Bytes expect = data;
  std::copy(patch.begin(), patch.end(), expect.begin() + C / 2);
  EXPECT_EQ(b.read_all(b.reopen()), expect);

  // A new file on the full disk: the error, and an empty (not torn) file.
  Backing fresh(fs.path() + "/fresh", C);
  EXPECT_EQ(fresh.file->write(0, more.data(), more.size()), -ENOSPC);
  EXPECT_LE(fresh.file->plain_size(), 0);
  EXPECT_TRUE(fresh.disk_size() == 0 || fresh.disk_size() == kFileHeaderBytes) << fresh.disk_size();

  // Once there is room again, writing works.
  ::unlink((fs.path() + "/filler").c_str());
  ASSERT_EQ(b.file->write(expect.size(), more.data(), more.size()), static_cast<ssize_t>(more.size()));
  expect.insert(expect.end(), more.begin(), more.end());
  EXPECT_EQ(b.read_all(b.reopen()), expect);
}

// A new file's first write carries its header (format 1: before chunk 0; format 2: in the block
// of chunk 0's entry) in one backing call. When that write fails, the file is as it was (empty)
// and the object forgets the header it made: the next write makes a fresh one and writes it,
// so that the file reads back through a new object.
TEST_F(ContentFileTest, FullDiskOnANewFilesFirstWriteLeavesItEmptyAndWritableAgain) {
  SmallTmpfs fs(dir.path());
  if (!fs.mounted()) GTEST_SKIP() << fs.why() << " (needs root or CAP_SYS_ADMIN)";
  const std::uint32_t C = 4096;
  for (int format : {1, 2}) {
    for (std::size_t size : {std::size_t{1000}, std::size_t{10240}, std::size_t{300} * 1024}) {
      SCOPED_TRACE("format " + std::to_string(format) + ", " + std::to_string(size) + " bytes");
      const std::string path = fs.path() + "/new";
      ::unlink(path.c_str());
      Backing b(path, C, 2, {}, format);
      b.file->assume_new_empty();  // as the mount's create does
      fill_up(fs.path() + "/filler");
      const Bytes data = pattern(size, static_cast<std::uint32_t>(size + format));
      EXPECT_EQ(b.file->write(0, data.data(), size), -ENOSPC);
      EXPECT_EQ(b.file->plain_size(), 0);
      EXPECT_EQ(b.disk_size(), 0u);
      ::unlink((fs.path() + "/filler").c_str());
      ASSERT_EQ(b.file->write(0, data.data(), size), static_cast<ssize_t>(size));
      EXPECT_EQ(b.read_all(*b.file), data);
      EXPECT_EQ(b.read_all(b.reopen()), data);
    }
  }
}

// Format 2: a write that grows a file's partial last chunk, just read to be resealed, reserves
// only the data's space (the chunk's entry was written with it and holds its space); on a full
// disk it fails before anything changed, and the file reads as it did.
TEST_F(ContentFileTest, FormatTwoFullDiskWhileGrowingThePartialLastChunkKeepsIt) {
  SmallTmpfs fs(dir.path());
  if (!fs.mounted()) GTEST_SKIP() << fs.why() << " (needs root or CAP_SYS_ADMIN)";
  const std::uint32_t C = 65536;  // room to grow inside the chunk beyond the blocks it has
  Backing b(fs.path() + "/grow2", C, 2, {}, 2);
  const Bytes data = pattern(C + 1000, 41);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  fill_up(fs.path() + "/filler");
  const Bytes tail = pattern(30000, 42);  // stays inside chunk 1
  EXPECT_EQ(b.file->write(data.size(), tail.data(), tail.size()), -ENOSPC);
  EXPECT_EQ(b.file->plain_size(), static_cast<std::int64_t>(data.size()));
  EXPECT_EQ(b.disk_size(), b.layout.cipher_size(data.size()));
  EXPECT_EQ(b.read_all(*b.file), data);
  EXPECT_EQ(b.read_all(b.reopen()), data);
  ::unlink((fs.path() + "/filler").c_str());
  ASSERT_EQ(b.file->write(data.size(), tail.data(), tail.size()), static_cast<ssize_t>(tail.size()));
  Bytes expect = data;
  expect.insert(expect.end(), tail.begin(), tail.end());
  EXPECT_EQ(b.read_all(b.reopen()), expect);
}

TEST_F(ContentFileTest, FullDiskWriteIntoAHoleKeepsTheFileReadable) {
  // A punched chunk inside the file takes no space, so writing into it needs new blocks even
  // though the file does not grow: on a full disk that write must fail cleanly, never leave a
  // half-written chunk that reads as EIO where zeros were.
  SmallTmpfs fs(dir.path());
  if (!fs.mounted()) GTEST_SKIP() << fs.why() << " (needs root or CAP_SYS_ADMIN)";
  const std::uint32_t C = 65536;
  Backing b(fs.path() + "/holey", C);
  Bytes expect = pattern(6 * C, 11);
  ASSERT_EQ(b.file->write(0, expect.data(), expect.size()), static_cast<ssize_t>(expect.size()));
  ASSERT_EQ(b.file->punch_hole(2 * C, 2 * C), 0);
  std::fill(expect.begin() + 2 * C, expect.begin() + 4 * C, 0);
  fill_up(fs.path() + "/filler");

  const Bytes w = pattern(C + 100, 12);
  const ssize_t n = b.file->write(2 * C + 50, w.data(), w.size());
  if (n >= 0) {
    ASSERT_EQ(n, static_cast<ssize_t>(w.size()));
    std::copy(w.begin(), w.end(), expect.begin() + 2 * C + 50);
  } else {
    EXPECT_EQ(n, -ENOSPC);
  }
  EXPECT_EQ(b.read_all(*b.file), expect);
  EXPECT_EQ(b.read_all(b.reopen()), expect);
}

TEST_F(ContentFileTest, FormatTwoDiskFullHalfwayThroughAnAppendInPartsKeepsTheFileAsItWas) {
  // A pure append reserves nothing: its parts go out one after the other until the disk is full.
  // The parts that landed are cut off again, and the write fails as a whole.
  SmallTmpfs fs(dir.path());
  if (!fs.mounted()) GTEST_SKIP() << fs.why() << " (needs root or CAP_SYS_ADMIN)";
  const std::uint32_t C = 4096;
  PartByPartEngine by_part;
  Backing b(fs.path() + "/victim", C, 2, {}, 2, nullptr, &by_part);
  const Bytes data = pattern(100 * 1024, 21);  // whole chunks: the append rewrites none
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  const std::string filler = fs.path() + "/filler";
  fill_up(filler);
  struct stat st {};
  ASSERT_EQ(::stat(filler.c_str(), &st), 0);
  ASSERT_EQ(::truncate(filler.c_str(), st.st_size > 300 * 1024 ? st.st_size - 300 * 1024 : 0), 0);  // 300 KiB free

  const std::size_t parts_before = by_part.parts();
  const Bytes more = pattern(600 * 1024, 22);
  EXPECT_EQ(b.file->write(data.size(), more.data(), more.size()), -ENOSPC);
  EXPECT_GE(by_part.parts() - parts_before, 2u) << "the append failed before a part of it was written";
  EXPECT_EQ(b.file->plain_size(), static_cast<std::int64_t>(data.size()));
  EXPECT_EQ(b.disk_size(), b.layout.cipher_size(data.size()));
  EXPECT_EQ(b.read_all(*b.file), data);
  EXPECT_EQ(b.read_all(b.reopen()), data);

  // With room again, the same append works.
  ::unlink(filler.c_str());
  ASSERT_EQ(b.file->write(data.size(), more.data(), more.size()), static_cast<ssize_t>(more.size()));
  Bytes expect = data;
  expect.insert(expect.end(), more.begin(), more.end());
  EXPECT_EQ(b.read_all(b.reopen()), expect);
}

// Restores RLIMIT_FSIZE and SIGXFSZ's disposition when it goes.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(std::uint64_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
    rlimit r = old_;
    r.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

TEST_F(ContentFileTest, FormatTwoRewriteFailingHalfwayThroughItsPartsIsPutBack) {
  // A write that rewrites durable chunks and grows the file passes its reservation (fallocate
  // keeps the size, which the limit does not govern), then a later part meets the file size
  // limit: the parts already written over durable chunks are put back from their pre-image, the
  // growth is cut off, and the file reads as before.
  const std::uint32_t C = 4096;
  PartByPartEngine by_part;
  Backing b(file_path("rewrite-limit"), C, 2, {}, 2, nullptr, &by_part);
  auto journal = journal_for(b, C);
  // Large enough that the journal's slots, which the limit governs too, lie below it.
  const std::size_t size = std::max<std::size_t>(3u << 20, 2 * ChunkJournal::slot_bytes(C) + (1u << 20));
  const Bytes data = pattern(size, 23);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  b.file->mark_durable();

  const Bytes more = pattern(1u << 20, 24);
  const std::uint64_t at = size - 600 * 1024;  // 600 KiB of rewrite, then 424 KiB of growth
  const std::size_t parts_before = by_part.parts();
  ssize_t n = 0;
  {
    FileSizeLimit limit(b.disk_size() + 200 * 1024);
    n = b.file->write(at, more.data(), more.size());
  }
  EXPECT_LT(n, 0);
  EXPECT_EQ(n, -EFBIG);
  EXPECT_GE(by_part.parts() - parts_before, 5u) << "the write failed before its rewrite was written";
  EXPECT_EQ(b.file->plain_size(), static_cast<std::int64_t>(size));
  EXPECT_EQ(b.disk_size(), b.layout.cipher_size(size));
  EXPECT_EQ(b.read_all(*b.file), data);
  EXPECT_EQ(b.read_all(b.reopen()), data);
}

}  // namespace
}  // namespace gcfs
