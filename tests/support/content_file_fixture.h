// The fixture the ContentFile tests share (tests/fs_content_*_test.cc): a temporary folder, a
// backing file with its keys, layout and ContentFile, and a test engine that seals in parts.
#pragma once

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

namespace gcfs::content_test {

using Bytes = std::vector<std::uint8_t>;

namespace stdfs = std::filesystem;

inline Bytes master_key() {
  Bytes m(kMasterKeyBytes);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<std::uint8_t>(0x5c ^ i);
  return m;
}

inline Bytes pattern(std::size_t n, std::uint32_t seed) {
  Bytes b(n);
  std::mt19937 rng(seed);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng() | 1);  // never zero: zeros are what holes read as
  return b;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gcfs-content-test-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    stdfs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One ciphertext file and the objects a ContentFile borrows.
struct Backing {
  // other_engine: what the file seals and opens with instead of `engine` (not owned).
  Backing(const std::string& path, std::uint32_t chunk_size, std::size_t threads = 2, const Bytes& prefix = {},
          int format = 1, BackingIo* io = nullptr, ChunkEngine* other_engine = nullptr)
      : path(path), layout(chunk_size, prefix.size(), format), engine(threads, 0), keys(master_key()), io(io),
        used(other_engine ? *other_engine : engine) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
    // What a volume keeps in front of its content stream, which the stream must never touch.
    if (!prefix.empty() && ::pwrite(fd, prefix.data(), prefix.size(), 0) != static_cast<ssize_t>(prefix.size()))
      throw std::runtime_error("cannot write the prefix");
    file = std::make_unique<ContentFile>(fd, layout, used, keys, path, nullptr, io);
  }
  ~Backing() {
    file.reset();
    if (fd >= 0) ::close(fd);
  }
  // A new ContentFile on the same descriptor: reads what is on disk, not what was cached.
  ContentFile& reopen() {
    file = std::make_unique<ContentFile>(fd, layout, used, keys, path, journal, io);
    return *file;
  }
  std::uint64_t disk_size() const {
    struct stat st {};
    ::fstat(fd, &st);
    return static_cast<std::uint64_t>(st.st_size);
  }
  std::uint64_t disk_blocks() const {
    struct stat st {};
    ::fstat(fd, &st);
    return static_cast<std::uint64_t>(st.st_blocks);
  }
  Bytes read_all(ContentFile& f) {
    const std::int64_t n = f.plain_size();
    EXPECT_GE(n, 0);
    if (n < 0) return {};
    Bytes out(static_cast<std::size_t>(n) + 100, 0xCC);
    ssize_t got = f.read(0, out.size(), out.data());
    EXPECT_EQ(got, n);
    out.resize(got < 0 ? 0 : static_cast<std::size_t>(got));
    return out;
  }
  Bytes raw(std::uint64_t off, std::size_t len) const {
    Bytes b(len);
    EXPECT_EQ(::pread(fd, b.data(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len));
    return b;
  }
  void poke(std::uint64_t off, const Bytes& b) const {
    ASSERT_EQ(::pwrite(fd, b.data(), b.size(), static_cast<off_t>(off)), static_cast<ssize_t>(b.size()));
  }

  std::string path;
  ChunkLayout layout;
  CpuEngine engine;
  KeyRing keys;
  BackingIo* io = nullptr;
  ChunkEngine& used;
  ChunkJournal* journal = nullptr;
  int fd = -1;
  std::unique_ptr<ContentFile> file;
};

class ContentFileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { log::set_min_level(log::Level::Error); }
  TempDir dir;
  std::string file_path(const char* name) const { return dir.path() + "/" + name; }
  // A crash journal of 4 slots in the test's directory, and b's ContentFile writing through it.
  std::unique_ptr<ChunkJournal> journal_for(Backing& b, std::uint32_t chunk_size) {
    std::string err;
    const int dfd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    auto j = ChunkJournal::open(dfd, dir.path(), b.keys, chunk_size, 4, &err);
    if (dfd >= 0) ::close(dfd);
    EXPECT_TRUE(j) << err;
    if (j) b.file = std::make_unique<ContentFile>(b.fd, b.layout, b.used, b.keys, b.path, j.get(), b.io);
    b.journal = j.get();
    return j;
  }
};


// An engine that hands a large write's sealed parts over one at a time, as the cpu engine does
// while its helpers keep ahead of the writer: every part of the write goes to disk on its own.
class PartByPartEngine final : public ChunkEngine {
 public:
  std::string name() const override { return "part by part"; }
  void seal(std::span<ChunkOp> ops) override { inner_.seal(ops); }
  void open(std::span<ChunkOp> ops) override { inner_.open(ops); }
  void seal_in_parts(std::span<ChunkOp> ops, std::span<const std::size_t> ends, const PartWriter& write) override {
    for (std::size_t p = 0; p < ends.size(); ++p) {
      const std::size_t a = p == 0 ? 0 : ends[p - 1];
      inner_.seal(ops.subspan(a, ends[p] - a));
      ++parts_;
      if (!write(p, p + 1)) return;
    }
  }
  std::size_t parts() const { return parts_.load(); }

 private:
  CpuEngine inner_{1};
  std::atomic<std::size_t> parts_{0};
};

}  // namespace gcfs::content_test
