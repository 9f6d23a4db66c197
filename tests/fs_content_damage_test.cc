// ContentFile against damaged ciphertext: flipped, swapped and foreign chunks, broken headers,
// incomplete last chunks and files cut short, and what the first read of a fresh object does.
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

// ------------------------------------------------------------------------- damage

class ContentFileDamage : public ContentFileTest {
 protected:
  static constexpr std::uint32_t C = 4096;
  // Four full chunks and a partial fifth.
  void SetUp() override {
    b = std::make_unique<Backing>(file_path("damage"), C);
    data = pattern(4 * C + 1000, 6);
    ASSERT_EQ(b->file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }
  // Reads chunk k whole (or the part of it the file holds).
  ssize_t read_chunk(ContentFile& f, std::uint64_t k, Bytes* out = nullptr) {
    Bytes buf(C);
    ssize_t n = f.read(k * C, C, buf.data());
    if (out) *out = buf;
    return n;
  }
  void expect_only_chunks_fail(ContentFile& f, std::set<std::uint64_t> bad) {
    for (std::uint64_t k = 0; k < 5; ++k) {
      Bytes got;
      const ssize_t n = read_chunk(f, k, &got);
      if (bad.count(k)) {
        EXPECT_EQ(n, -EIO) << "chunk " << k;
        EXPECT_EQ(got, Bytes(C, 0)) << "chunk " << k << ": no unauthenticated bytes may reach the caller";
      } else {
        const std::size_t want = k < 4 ? C : 1000;
        ASSERT_EQ(n, static_cast<ssize_t>(want)) << "chunk " << k;
        EXPECT_TRUE(std::equal(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(want),
                               data.begin() + static_cast<std::ptrdiff_t>(k * C)))
            << "chunk " << k;
      }
    }
    // A read that spans a bad chunk fails as a whole.
    if (!bad.empty()) {
      Bytes all(data.size());
      EXPECT_EQ(f.read(0, all.size(), all.data()), -EIO);
    }
  }
  std::unique_ptr<Backing> b;
  Bytes data;
};

TEST_F(ContentFileDamage, OneFlippedByteFailsOnlyItsChunk) {
  const std::uint64_t D = b->layout.disk_chunk_size();
  // In the nonce, the ciphertext and the tag of chunk 2, and in the partial last chunk.
  const std::pair<std::uint64_t, std::uint64_t> spots[] = {
      {2, 0}, {2, 5}, {2, 12}, {2, 12 + C / 2}, {2, 12 + C - 1}, {2, 12 + C}, {2, D - 1}, {4, 12 + 500}, {4, 12 + 1000 + 15}};
  for (auto [k, at] : spots) {
    SCOPED_TRACE("chunk " + std::to_string(k) + " byte " + std::to_string(at));
    const std::uint64_t off = b->layout.disk_offset(k) + at;
    Bytes orig = b->raw(off, 1);
    b->poke(off, {static_cast<std::uint8_t>(orig[0] ^ 0x10)});
    expect_only_chunks_fail(*b->file, {k});
    expect_only_chunks_fail(b->reopen(), {k});
    // A partial write into the damaged chunk needs its old bytes: refused, not papered over.
    const Bytes w = pattern(10, 7);
    EXPECT_EQ(b->file->write(k * C + 100, w.data(), w.size()), -EIO);
    b->poke(off, orig);
    expect_only_chunks_fail(*b->file, {});
  }
}

TEST_F(ContentFileDamage, OverwritingADamagedChunkWholeRepairsIt) {
  const std::uint64_t off = b->layout.disk_offset(1) + 40;
  b->poke(off, {0xFF, 0xFF, 0xFF});
  expect_only_chunks_fail(*b->file, {1});
  ASSERT_EQ(b->file->write(C, data.data() + C, C), static_cast<ssize_t>(C));
  expect_only_chunks_fail(*b->file, {});
}

TEST_F(ContentFileDamage, SwappedChunksFail) {
  const std::uint64_t D = b->layout.disk_chunk_size();
  const Bytes c1 = b->raw(b->layout.disk_offset(1), D), c3 = b->raw(b->layout.disk_offset(3), D);
  b->poke(b->layout.disk_offset(1), c3);
  b->poke(b->layout.disk_offset(3), c1);
  expect_only_chunks_fail(b->reopen(), {1, 3});
  // A chunk duplicated over another (a replay of an older position) fails too.
  b->poke(b->layout.disk_offset(1), c1);
  b->poke(b->layout.disk_offset(3), c3);
  b->poke(b->layout.disk_offset(0), c1);
  expect_only_chunks_fail(b->reopen(), {0});
}

TEST_F(ContentFileDamage, HeaderOrChunksFromAnotherFileFail) {
  // Another file with the same plaintext: same key ring, different file ID.
  Backing other(file_path("other"), C);
  ASSERT_EQ(other.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  const Bytes my_header = b->raw(0, 24);
  b->poke(0, other.raw(0, 24));
  expect_only_chunks_fail(b->reopen(), {0, 1, 2, 3, 4});
  b->poke(0, my_header);
  expect_only_chunks_fail(b->reopen(), {});
  // One chunk from the other file at the same position.
  const std::uint64_t D = b->layout.disk_chunk_size();
  b->poke(b->layout.disk_offset(2), other.raw(other.layout.disk_offset(2), D));
  expect_only_chunks_fail(b->reopen(), {2});
}

TEST_F(ContentFileDamage, BrokenHeaderFailsEveryRead) {
  b->poke(0, {'X'});
  ContentFile& f = b->reopen();
  Bytes out(10);
  EXPECT_EQ(f.read(0, 10, out.data()), -EIO);
  EXPECT_EQ(f.read(3 * C, 10, out.data()), -EIO);
}

// A file that ends in an incomplete chunk (1 to 28 bytes: no room for its nonce and tag), as an
// append cut short between pages by a killed daemon leaves it, reads as its whole chunks: every
// byte before the fragment stays readable, the fragment is dropped by the next write at the end,
// and the log says so. A size inside the header is corrupt (EIO).
TEST_F(ContentFileDamage, IncompleteLastChunkIsLeftOutAndACutHeaderIsEio) {
  const std::string log_path = file_path("incomplete.log");
  log::to_file(log_path);
  log::set_min_level(log::Level::Warning);
  struct BackToStderr {
    ~BackToStderr() {
      log::to_stderr();
      log::set_min_level(log::Level::Error);  // the suite's level
    }
  } back_to_stderr;
  auto log_text = [&] {
    std::ifstream in(log_path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::uint64_t good = b->disk_size();
  for (std::uint64_t cut : {good - 1000 - 1, good - 1000 - 28 + 1, good - 1000 - 28 + 13}) {
    SCOPED_TRACE(cut);
    ASSERT_EQ(::ftruncate(b->fd, static_cast<off_t>(cut)), 0);
    ContentFile& f = b->reopen();
    ASSERT_EQ(f.plain_size(), static_cast<std::int64_t>(4 * C));
    Bytes out(4 * C);
    ASSERT_EQ(f.read(0, out.size(), out.data()), static_cast<ssize_t>(4 * C));
    EXPECT_TRUE(std::equal(out.begin(), out.end(), data.begin()));
    // Appending replaces the fragment: the file is whole again, the earlier chunks untouched.
    const Bytes tail = pattern(1000, 61);
    ASSERT_EQ(f.write(4 * C, tail.data(), tail.size()), static_cast<ssize_t>(tail.size()));
    EXPECT_EQ(b->disk_size(), good);
    ContentFile& g = b->reopen();
    Bytes all(4 * C + 1000);
    ASSERT_EQ(g.read(0, all.size(), all.data()), static_cast<ssize_t>(all.size()));
    EXPECT_TRUE(std::equal(all.begin(), all.begin() + 4 * C, data.begin()));
    EXPECT_TRUE(std::equal(all.begin() + 4 * C, all.end(), tail.begin()));
    ASSERT_EQ(g.write(4 * C, data.data() + 4 * C, 1000), 1000);  // back to the fixture's contents
  }
  EXPECT_NE(log_text().find("incomplete chunk"), std::string::npos) << log_text();
  // Cut inside the header: no chunk can be found, the file is corrupt as a whole.
  ASSERT_EQ(::ftruncate(b->fd, 10), 0);
  ContentFile& f = b->reopen();
  Bytes out(10);
  EXPECT_EQ(f.plain_size(), -EIO);
  EXPECT_EQ(f.read(0, 10, out.data()), -EIO);
  EXPECT_EQ(f.write(0, out.data(), out.size()), -EIO);
  EXPECT_EQ(f.truncate(5), -EIO);
  // An object that had the old size cached finds out on reload.
  ASSERT_EQ(::ftruncate(b->fd, static_cast<off_t>(good)), 0);
  ContentFile& g = b->reopen();
  ASSERT_EQ(g.plain_size(), static_cast<std::int64_t>(data.size()));
  ASSERT_EQ(::ftruncate(b->fd, 10), 0);
  EXPECT_EQ(g.reload(), -EIO);
}

// Issue 18, finding 8: after an incomplete last chunk, growing the file (truncate upwards, a write
// past the end, fallocate) reads as zeros past the whole chunks, as docs/FORMAT.md "Sizes" says,
// never as EIO: the fragment is dropped before the file grows over it, so the chunk that takes
// its place is a hole instead of the fragment's bytes followed by zeros. Truncating to the size
// the file reads as drops it too.
TEST_F(ContentFileDamage, GrowingAFileWithAnIncompleteLastChunkReadsAsZeros) {
  const std::uint64_t good = b->disk_size();
  const std::uint64_t whole = b->layout.cipher_size(4 * C);  // the four whole chunks
  const Bytes zeros(2 * C, 0);
  auto expect_whole_chunks_then_zeros = [&](ContentFile& f, std::uint64_t size) {
    ASSERT_EQ(f.plain_size(), static_cast<std::int64_t>(size));
    Bytes all(size);
    ASSERT_EQ(f.read(0, all.size(), all.data()), static_cast<ssize_t>(size));
    EXPECT_TRUE(std::equal(all.begin(), all.begin() + 4 * C, data.begin()));
    EXPECT_TRUE(std::all_of(all.begin() + 4 * C, all.end(), [](std::uint8_t x) { return x == 0; }));
  };
  for (std::uint64_t fragment : {1, 13, 28}) {
    SCOPED_TRACE("fragment of " + std::to_string(fragment) + " bytes");
    for (int how = 0; how < 4; ++how) {
      SCOPED_TRACE("how " + std::to_string(how));
      ASSERT_EQ(::ftruncate(b->fd, static_cast<off_t>(whole + fragment)), 0);
      ContentFile& f = b->reopen();
      ASSERT_EQ(f.plain_size(), static_cast<std::int64_t>(4 * C));
      if (how == 0) {  // truncate upwards inside the chunk that held the fragment
        ASSERT_EQ(f.truncate(4 * C + 500), 0);
        expect_whole_chunks_then_zeros(f, 4 * C + 500);
        expect_whole_chunks_then_zeros(b->reopen(), 4 * C + 500);
      } else if (how == 1) {  // truncate upwards past it
        ASSERT_EQ(f.truncate(6 * C + 7), 0);
        expect_whole_chunks_then_zeros(f, 6 * C + 7);
        expect_whole_chunks_then_zeros(b->reopen(), 6 * C + 7);
      } else if (how == 2) {  // a write past the end leaves a gap where the fragment was
        const Bytes tail = pattern(100, 62);
        ASSERT_EQ(f.write(5 * C, tail.data(), tail.size()), 100);
        for (bool fresh : {false, true}) {  // the same object, then a new one (which replaces it)
          ContentFile& g = fresh ? b->reopen() : f;
          Bytes all(5 * C + 100);
          ASSERT_EQ(g.read(0, all.size(), all.data()), static_cast<ssize_t>(all.size()));
          EXPECT_TRUE(std::equal(all.begin(), all.begin() + 4 * C, data.begin()));
          EXPECT_TRUE(std::equal(all.begin() + 4 * C, all.begin() + 5 * C, zeros.begin()));
          EXPECT_TRUE(std::equal(all.begin() + 5 * C, all.end(), tail.begin()));
        }
      } else {  // truncating to the size it reads as keeps the size and drops the fragment
        ASSERT_EQ(f.truncate(4 * C), 0);
        EXPECT_EQ(b->disk_size(), whole);
        ASSERT_EQ(f.extend_to(4 * C + 10), 0);
        expect_whole_chunks_then_zeros(b->reopen(), 4 * C + 10);
      }
      ASSERT_EQ(b->file->truncate(4 * C), 0);
      ASSERT_EQ(b->file->write(4 * C, data.data() + 4 * C, 1000), 1000);  // back to the fixture's contents
      ASSERT_EQ(b->disk_size(), good);
    }
  }
  // A file of nothing but a header and a fragment reads as empty and grows as zeros, too.
  ASSERT_EQ(::ftruncate(b->fd, static_cast<off_t>(kFileHeaderBytes + 20)), 0);
  ContentFile& f = b->reopen();
  ASSERT_EQ(f.plain_size(), 0);
  ASSERT_EQ(f.truncate(300), 0);
  for (bool fresh : {false, true}) {
    ContentFile& g = fresh ? b->reopen() : f;
    Bytes all(300, 0xCC);
    ASSERT_EQ(g.read(0, all.size(), all.data()), 300);
    EXPECT_EQ(all, Bytes(300, 0));
  }
}

TEST_F(ContentFileDamage, FileCutShortUnderAnOpenObjectIsEioNotGarbage) {
  ContentFile& f = *b->file;  // has the size cached
  ASSERT_EQ(::ftruncate(b->fd, static_cast<off_t>(b->layout.cipher_size(2 * C + 500))), 0);
  Bytes out(C);
  EXPECT_EQ(f.read(3 * C, C, out.data()), -EIO);
  EXPECT_EQ(f.read(0, C, out.data()), static_cast<ssize_t>(C));
}

// ------------------------------------------------------------------------- first reads

// A fresh object's first read of chunk 0 brings the file header in the same backing read (format
// 2: from the metadata block's start; and where the data follows the block and goes through the
// page cache, block and data in one read: a small file's whole read). What the combined read
// brings must be checked exactly as separate reads of each part are. Parameter: format, and for
// format 2 whether chunk data goes through O_DIRECT (then reads of 16 KiB and more go direct
// and are not combined with the block).
struct FirstReadCase {
  int format;
  bool direct;
};

class ContentFileFirstRead : public ContentFileTest, public ::testing::WithParamInterface<FirstReadCase> {
 protected:
  static constexpr std::uint32_t C = 4096;
  std::unique_ptr<Backing> make(const char* name) {
    io_ = std::make_unique<BackingIo>(GetParam().direct ? BackingIoMode::Direct : BackingIoMode::Buffered);
    return std::make_unique<Backing>(file_path(name), C, 2, Bytes{}, GetParam().format, io_.get());
  }
  // A fresh object on b's file: it knows neither the header nor the size yet.
  ContentFile& fresh(Backing& b) { return b.reopen(); }
  // Where chunk k's nonce, tag and ciphertext byte i lie (the layout's offsets, both formats).
  std::uint64_t nonce_at(Backing& b, std::uint64_t k) { return b.layout.nonce_offset(k); }
  std::uint64_t tag_at(Backing& b, std::uint64_t k, std::uint64_t size) { return b.layout.tag_offset(k, size); }
  std::uint64_t data_at(Backing& b, std::uint64_t k, std::uint64_t size, std::uint64_t i) {
    return b.layout.data_offset(k, size) + i;
  }
  void flip(Backing& b, std::uint64_t off) {
    Bytes x = b.raw(off, 1);
    x[0] ^= 0x20;
    b.poke(off, x);
  }
  std::unique_ptr<BackingIo> io_;
};

TEST_P(ContentFileFirstRead, EverySizeReadsBackFromAFreshObjectAtAnyOffset) {
  // Inline and not, a whole block, a few chunks, past 16 KiB (direct reads), past group 0.
  for (std::size_t size : {std::size_t{1}, std::size_t{1000}, std::size_t{3968}, std::size_t{3969}, std::size_t{4096},
                           std::size_t{10240}, std::size_t{20000}, std::size_t{130} * C + 5}) {
    SCOPED_TRACE("size " + std::to_string(size));
    auto b = make("sizes");
    const Bytes data = pattern(size, static_cast<std::uint32_t>(size));
    ASSERT_EQ(b->file->write(0, data.data(), size), static_cast<ssize_t>(size));
    // The whole file first, then a first read that starts elsewhere (its header read alone).
    EXPECT_EQ(b->read_all(fresh(*b)), data);
    for (std::uint64_t off : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{C}, std::uint64_t{128} * C + 1}) {
      if (off >= size) continue;
      ContentFile& f = fresh(*b);
      const std::size_t len = std::min<std::size_t>(3 * C + 7, size - off);
      Bytes out(len + 1, 0xCC);
      ASSERT_EQ(f.read(off, len, out.data()), static_cast<ssize_t>(len)) << off;
      EXPECT_TRUE(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(len),
                             data.begin() + static_cast<std::ptrdiff_t>(off)))
          << off;
      EXPECT_EQ(out[len], 0xCC);
      // And the rest of the file through the same object, the header now known.
      EXPECT_EQ(b->read_all(f), data);
    }
  }
  if (GetParam().direct) {
    EXPECT_FALSE(io_->fell_back());
  }
}

TEST_P(ContentFileFirstRead, ATamperedHeaderFailsTheReadThatBringsIt) {
  for (std::size_t size : {std::size_t{1000}, std::size_t{10240}, std::size_t{20000}}) {
    auto b = make("header");
    const Bytes data = pattern(size, 31);
    ASSERT_EQ(b->file->write(0, data.data(), size), static_cast<ssize_t>(size));
    // Magic, version, reserved field, file ID: each byte is checked, or binds every chunk.
    for (std::uint64_t at : {0, 3, 5, 6, 7, 8, 15, 23}) {
      SCOPED_TRACE("size " + std::to_string(size) + ", header byte " + std::to_string(at));
      flip(*b, at);
      Bytes out(size, 0xCC);
      EXPECT_EQ(fresh(*b).read(0, size, out.data()), -EIO);
      EXPECT_EQ(out, Bytes(size, 0xCC)) << "no unauthenticated byte may reach the caller";
      EXPECT_EQ(fresh(*b).read(size / 2, 10, out.data()), -EIO);
      flip(*b, at);
      EXPECT_EQ(b->read_all(fresh(*b)), data);
    }
  }
}

TEST_P(ContentFileFirstRead, TamperedNonceTagOrCiphertextInTheFirstReadFailsItsChunk) {
  const std::size_t size = 3 * C - 500;  // three chunks, in one read
  auto b = make("entries");
  const Bytes data = pattern(size, 32);
  ASSERT_EQ(b->file->write(0, data.data(), size), static_cast<ssize_t>(size));
  for (std::uint64_t k = 0; k < 3; ++k) {
    for (std::uint64_t off : {nonce_at(*b, k) + 3, tag_at(*b, k, size) + 15, data_at(*b, k, size, 0),
                              data_at(*b, k, size, b->layout.chunk_plain_len(k, size) - 1)}) {
      SCOPED_TRACE("chunk " + std::to_string(k) + ", byte at " + std::to_string(off));
      flip(*b, off);
      Bytes out(size, 0xCC);
      EXPECT_EQ(fresh(*b).read(0, size, out.data()), -EIO);
      for (std::uint64_t j = 0; j < 3; ++j) {  // a first read of each chunk alone: only k fails
        const std::size_t len = b->layout.chunk_plain_len(j, size);
        ContentFile& f = fresh(*b);
        if (j == k) {
          EXPECT_EQ(f.read(j * C, len, out.data()), -EIO) << j;
        } else {
          ASSERT_EQ(f.read(j * C, len, out.data()), static_cast<ssize_t>(len)) << j;
          EXPECT_TRUE(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(len),
                                 data.begin() + static_cast<std::ptrdiff_t>(j * C)));
        }
      }
      flip(*b, off);
    }
  }
  // An inline file (format 2) or a one-chunk file: its entry and ciphertext come with the header.
  auto s = make("small");
  const Bytes small = pattern(700, 33);
  ASSERT_EQ(s->file->write(0, small.data(), small.size()), 700);
  for (std::uint64_t off : {nonce_at(*s, 0), tag_at(*s, 0, 700) + 1, data_at(*s, 0, 700, 350)}) {
    flip(*s, off);
    Bytes out(700);
    EXPECT_EQ(fresh(*s).read(0, 700, out.data()), -EIO) << off;
    flip(*s, off);
  }
  EXPECT_EQ(s->read_all(fresh(*s)), small);
}

TEST_P(ContentFileFirstRead, AFileShorterThanTheFirstReadIsEioNotGarbage) {
  // The size is known (read by the object) and the file is cut underneath before the first read
  // of its chunks: inside the header, inside the entries, in the gap before the data, inside
  // the data.
  for (std::size_t size : {std::size_t{1000}, std::size_t{10240}, std::size_t{20000}}) {
    auto b = make("cut");
    const Bytes data = pattern(size, 34);
    ASSERT_EQ(b->file->write(0, data.data(), size), static_cast<ssize_t>(size));
    const std::uint64_t full = b->disk_size();
    for (std::uint64_t cut : {std::uint64_t{10}, std::uint64_t{30}, std::uint64_t{100}, std::uint64_t{2000},
                              std::uint64_t{4100}, full - 1}) {
      if (cut >= full) continue;
      SCOPED_TRACE("size " + std::to_string(size) + ", cut at " + std::to_string(cut));
      // Read whole first: this thread's buffers then hold exactly the bytes the cut removes, so
      // that a read taking a short backing read for a whole one would succeed.
      ASSERT_EQ(b->read_all(fresh(*b)), data);
      ContentFile& f = fresh(*b);
      ASSERT_EQ(f.plain_size(), static_cast<std::int64_t>(size));
      ASSERT_EQ(::ftruncate(b->fd, static_cast<off_t>(cut)), 0);
      Bytes out(size, 0xCC);
      EXPECT_EQ(f.read(0, size, out.data()), -EIO);
      EXPECT_EQ(out, Bytes(size, 0xCC));
      ASSERT_EQ(b->file->truncate(0), 0);  // put it back
      ASSERT_EQ(b->file->write(0, data.data(), size), static_cast<ssize_t>(size));
      ASSERT_EQ(b->disk_size(), full);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ContentFileFirstRead,
                         ::testing::Values(FirstReadCase{1, false}, FirstReadCase{2, false}, FirstReadCase{2, true}),
                         [](const auto& info) {
                           return "V" + std::to_string(info.param.format) + (info.param.direct ? "Direct" : "Buffered");
                         });

}  // namespace
}  // namespace gcfs
