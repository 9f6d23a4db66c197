// ContentFile on real files with the cpu engine: a seeded random exerciser against a shadow copy
// (both formats), reads, holes, nonces, the crash journal's pre-images and the documented bytes.
// The shared fixture: tests/support/content_file_fixture.h; damage, format 2's own layout,
// concurrency and a full disk have files of their own (fs_content_*_test.cc).
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

// ------------------------------------------------------------------------- random exerciser

class ContentFileRandomOps : public ContentFileTest, public ::testing::WithParamInterface<std::uint32_t> {};

// GCFS_SOAK=N runs N seeds instead of one, for hunting rare sequences outside the normal suite.
int soak_rounds() {
  const char* v = std::getenv("GCFS_SOAK");
  return v ? std::max(1, std::atoi(v)) : 1;
}

// format 2 (aligned) also reaches past the first group of 128 chunks, and lands near the places
// where its layout changes: the inline limit (3968 bytes) and the group boundary. With
// make_journal, rewrites of durable chunks journal their pre-images (marked durable at random).
void random_ops(const std::string& path, std::uint32_t C, std::uint64_t seed, const Bytes& prefix = {},
                int format = 1, BackingIo* io = nullptr,
                const std::function<std::unique_ptr<ChunkJournal>(Backing&)>& make_journal = {}) {
  Backing b(path, C, 3, prefix, format, io);
  std::unique_ptr<ChunkJournal> journal;
  if (make_journal) journal = make_journal(b);
  Bytes shadow;
  std::mt19937_64 rng(seed);
  auto rand_upto = [&](std::uint64_t n) { return n ? rng() % (n + 1) : 0; };
  const std::uint64_t max_size = format == 1 ? 7 * C + C / 2 : 130 * std::uint64_t{C} + C / 2;
  auto near_edge = [&](std::uint64_t off) {
    if (format == 1 || rng() % 3 != 0) return off;
    const std::uint64_t edges[] = {3968, 3969, 3967, 128 * std::uint64_t{C}, 127 * std::uint64_t{C} + 5,
                                   128 * std::uint64_t{C} - 1, 0};
    return edges[rng() % 7];
  };

  for (int step = 0; step < 400; ++step) {
    SCOPED_TRACE("step " + std::to_string(step) + " size " + std::to_string(shadow.size()));
    ContentFile& f = *b.file;
    const int op = static_cast<int>(rng() % 100);
    if (op < 45) {
      // Writes at random offsets and lengths, crossing chunk boundaries and the end of file.
      std::uint64_t off = rand_upto(std::min<std::uint64_t>(max_size, shadow.size() + 2 * C));
      if (rng() % 4 == 0) off = (off / C) * C + (rng() % 3 == 0 ? C - 1 : 0);  // near a boundary
      off = near_edge(off);
      std::size_t len = 1 + static_cast<std::size_t>(rand_upto(rng() % 3 == 0 ? 3 * C : C / 2 + 1));
      const Bytes data = pattern(len, static_cast<std::uint32_t>(rng()));
      ASSERT_EQ(f.write(off, data.data(), len), static_cast<ssize_t>(len));
      if (shadow.size() < off + len) shadow.resize(off + len, 0);
      std::copy(data.begin(), data.end(), shadow.begin() + static_cast<std::ptrdiff_t>(off));
    } else if (op < 60) {
      std::uint64_t size = rand_upto(max_size);
      if (rng() % 3 == 0) size = (size / C) * C + (rng() % 2);  // boundary and boundary + 1
      if (rng() % 10 == 0) size = 0;
      size = near_edge(size);
      ASSERT_EQ(f.truncate(size), 0);
      shadow.resize(size, 0);
    } else if (op < 72) {
      const std::uint64_t off = rand_upto(shadow.size() + C);
      std::uint64_t len = rand_upto(3 * C);
      if (rng() % 3 == 0) len = C * (1 + rng() % 3);  // whole chunks when aligned
      ASSERT_EQ(f.punch_hole(off, len), 0);
      for (std::uint64_t i = off; i < std::min<std::uint64_t>(shadow.size(), off + len); ++i) shadow[i] = 0;
    } else if (op < 95) {
      const std::uint64_t off = rand_upto(shadow.size() + C);
      const std::size_t len = static_cast<std::size_t>(rand_upto(3 * C));
      Bytes out(len + 1, 0xCC);
      const ssize_t got = f.read(off, len, out.data());
      const std::size_t expect = off >= shadow.size() ? 0 : std::min<std::size_t>(len, shadow.size() - off);
      ASSERT_EQ(got, static_cast<ssize_t>(expect));
      ASSERT_TRUE(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(expect),
                             shadow.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(off, shadow.size()))));
      ASSERT_EQ(out[expect], 0xCC) << "read wrote past what it returned";
    } else if (op < 97 && journal) {
      b.file->mark_durable();  // what fsync does: later rewrites journal their pre-images
    } else {
      b.reopen();  // what is on disk, not what is cached, must match
    }
    // After every step: size, contents, and the on-disk size the format dictates.
    ASSERT_EQ(b.file->plain_size(), static_cast<std::int64_t>(shadow.size()));
    ASSERT_EQ(b.read_all(*b.file), shadow);
    const std::uint64_t disk = b.disk_size() - prefix.size();
    if (shadow.empty()) {
      ASSERT_TRUE(disk == 0 || disk == kFileHeaderBytes) << disk;
    } else {
      ASSERT_EQ(disk, b.layout.cipher_size(shadow.size()));
    }
  }
  ContentFile& fresh = b.reopen();
  EXPECT_EQ(b.read_all(fresh), shadow);
  if (!prefix.empty()) {
    EXPECT_EQ(b.raw(0, prefix.size()), prefix);
  }
}

TEST_P(ContentFileRandomOps, MatchesShadowAfterEveryStep) {
  const std::uint32_t C = GetParam();
  for (int round = 0; round < soak_rounds(); ++round) {
    SCOPED_TRACE("seed round " + std::to_string(round));
    ::unlink(file_path("random").c_str());
    random_ops(file_path("random"), C, (0xC0FFEEull ^ C) + 7919ull * round);
    if (HasFatalFailure()) return;
  }
}

TEST_P(ContentFileRandomOps, MatchesShadowBehindABaseOffset) {
  // The volume container's layout: a block in front of the stream that is never touched.
  const Bytes prefix = pattern(4096 + 13, 77);
  ::unlink(file_path("based").c_str());
  random_ops(file_path("based"), GetParam(), 0xBA5E ^ GetParam(), prefix);
}

INSTANTIATE_TEST_SUITE_P(ChunkSizes, ContentFileRandomOps, ::testing::Values(64u, 4096u),
                         [](const auto& info) { return "C" + std::to_string(info.param); });


// ------------------------------------------------------------------------- format 2

class ContentFileV2 : public ContentFileTest, public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(ContentFileV2, RandomOpsMatchTheShadow) {
  const std::uint32_t C = GetParam();
  for (int round = 0; round < soak_rounds(); ++round) {
    SCOPED_TRACE("seed round " + std::to_string(round));
    ::unlink(file_path("random2").c_str());
    random_ops(file_path("random2"), C, (0xF0F2ull ^ C) + 7919ull * round, {}, 2);
    if (HasFatalFailure()) return;
  }
}

TEST_P(ContentFileV2, RandomOpsWithJournalAndODirect) {
  // /tmp is a disk filesystem that takes O_DIRECT: chunk data then bypasses the page cache, and
  // rewrites of durable chunks journal pre-images gathered from entries and data blocks.
  const std::uint32_t C = GetParam();
  BackingIo io(BackingIoMode::Direct);
  ::unlink(file_path("direct2").c_str());
  random_ops(file_path("direct2"), C, 0xD12EC7ull ^ C, {}, 2, &io,
             [&](Backing& b) { return journal_for(b, C); });
  EXPECT_FALSE(io.fell_back());
}

TEST_P(ContentFileV2, RandomOpsBehindAVolumesBaseOffset) {
  const Bytes prefix = pattern(65536, 78);
  ::unlink(file_path("based2").c_str());
  random_ops(file_path("based2"), GetParam(), 0xBA5E2 ^ GetParam(), prefix, 2);
}

INSTANTIATE_TEST_SUITE_P(ChunkSizes, ContentFileV2, ::testing::Values(4096u, 8192u),
                         [](const auto& info) { return "C" + std::to_string(info.param); });

// ------------------------------------------------------------------------- reads and holes

TEST_F(ContentFileTest, EmptyFileAndReadsPastEof) {
  Backing b(file_path("eof"), 4096);
  ContentFile& f = *b.file;
  Bytes out(100, 0xCC);
  EXPECT_EQ(f.plain_size(), 0);
  EXPECT_EQ(f.read(0, 100, out.data()), 0);
  EXPECT_EQ(b.disk_size(), 0u);  // an empty plaintext is an empty ciphertext
  const Bytes data = pattern(5000, 1);
  ASSERT_EQ(f.write(0, data.data(), data.size()), 5000);
  EXPECT_EQ(f.read(5000, 100, out.data()), 0);
  EXPECT_EQ(f.read(1u << 30, 100, out.data()), 0);
  EXPECT_EQ(f.read(4990, 100, out.data()), 10);
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 10, data.end() - 10));
  EXPECT_EQ(f.read(0, 0, out.data()), 0);
  EXPECT_EQ(f.write(10, data.data(), 0), 0);
  EXPECT_EQ(f.plain_size(), 5000);
  EXPECT_EQ(f.truncate(0), 0);
  EXPECT_EQ(b.disk_size(), 0u);
  EXPECT_EQ(f.read(0, 100, out.data()), 0);
}

// A READ over FUSE's io_uring decrypts straight into the ring entry's payload (the "room") where
// the chunks fit there whole from its start; elsewhere it uses the thread's scratch, and the
// room is left alone.
TEST_F(ContentFileTest, ReadViewDecryptsIntoTheRoomOnlyWhereWholeChunksFit) {
  Backing b(file_path("room"), 4096);
  ContentFile& f = *b.file;
  const Bytes data = pattern(3 * 4096 + 100, 7);
  ASSERT_EQ(f.write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  Bytes room(4 * 4096, 0xAB);
  const std::uint8_t* view = nullptr;
  // Chunk-aligned, with room for every chunk touched (the last one short, at end of file).
  ASSERT_EQ(f.read_view(4096, 3 * 4096, &view, room.data(), room.size()), static_cast<ssize_t>(2 * 4096 + 100));
  EXPECT_EQ(view, room.data());
  EXPECT_TRUE(std::equal(view, view + 2 * 4096 + 100, data.begin() + 4096));
  // Mid-chunk: the first chunk would start before the room.
  Bytes untouched(room.size(), 0x5C);
  room = untouched;
  ASSERT_EQ(f.read_view(100, 4096, &view, room.data(), room.size()), 4096);
  EXPECT_NE(view, room.data());
  EXPECT_TRUE(std::equal(view, view + 4096, data.begin() + 100));
  EXPECT_EQ(room, untouched);
  // Aligned, but the chunks touched (two: 4096 + 1 bytes) are larger than the room.
  ASSERT_EQ(f.read_view(0, 4097, &view, room.data(), 4097), 4097);
  EXPECT_NE(view, room.data());
  EXPECT_TRUE(std::equal(view, view + 4097, data.begin()));
  EXPECT_EQ(room, untouched);
}

// Format 2 reads a plain READ's ciphertext into the room and opens it there, in place: the same
// bytes as through the scratch buffers, O_DIRECT or not, holes as zeros, and a chunk that fails
// authentication is neither plaintext nor ciphertext in the room afterwards but zeros.
TEST_F(ContentFileTest, FormatTwoReadViewOpensInPlaceInTheRoom) {
  const std::uint32_t C = 4096;
  for (BackingIoMode mode : {BackingIoMode::Direct, BackingIoMode::Buffered}) {
    BackingIo io(mode);
    Backing b(file_path(mode == BackingIoMode::Direct ? "inplace_direct" : "inplace"), C, 2, {}, 2, &io);
    const Bytes data = pattern(130 * C + 777, 31);  // two groups, a short last chunk
    ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ASSERT_EQ(b.file->punch_hole(3 * C, C), 0);  // chunk 3 is a hole
    Bytes want = data;
    std::fill(want.begin() + 3 * C, want.begin() + 4 * C, 0);
    ContentFile& f = b.reopen();
    // Page-aligned room, as a ring entry's payload is (O_DIRECT reads land there).
    const std::size_t room_bytes = 132 * C;
    HostBuffer room = HostBuffer::plain(room_bytes);
    const std::uint8_t* view = nullptr;
    // Across the group boundary, to the end of the file (the short chunk read rounded up).
    const std::uint64_t off = 100 * C;
    ASSERT_EQ(f.read_view(off, 40 * C, &view, room.data(), room_bytes), static_cast<ssize_t>(data.size() - off));
    EXPECT_EQ(view, room.data());
    EXPECT_TRUE(std::equal(view, view + (data.size() - off), want.begin() + off));
    // The whole file, with the hole, equals what the scratch path gives (no room).
    ASSERT_EQ(f.read_view(0, data.size(), &view, room.data(), room_bytes), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(Bytes(view, view + data.size()), want);
    EXPECT_EQ(b.read_all(f), want);
    EXPECT_FALSE(io.fell_back());

    // A flipped bit in chunk 129's ciphertext: EIO, the chunk zeroed in the room, the other
    // chunks of the request as they are.
    const std::uint64_t at = b.layout.data_offset(129, data.size()) + 7;
    Bytes byte = b.raw(at, 1);
    byte[0] ^= 0x01;
    b.poke(at, byte);
    ContentFile& g = b.reopen();
    std::memset(room.data(), 0xAB, room_bytes);
    EXPECT_EQ(g.read_view(128 * C, 2 * C, &view, room.data(), room_bytes), -EIO);
    EXPECT_TRUE(std::equal(room.data(), room.data() + C, data.begin() + 128 * C));
    EXPECT_TRUE(std::all_of(room.data() + C, room.data() + 2 * C, [](std::uint8_t x) { return x == 0; }));
    EXPECT_EQ(g.read_view(128 * C, C, &view, room.data(), room_bytes), static_cast<ssize_t>(C));
  }
}

// A small file's first read (its header not known yet, buffered I/O, from chunk 0) brings the
// metadata block along in one call, into room in front of the scratch buffer; read in place into
// a request's own buffer, nothing is written in front of it: the bytes before the room stay as
// they were, and the file reads back whole, its header checked.
TEST_F(ContentFileTest, FormatTwoFirstReadInPlaceWritesNothingInFrontOfTheRoom) {
  const std::uint32_t C = 4096;
  BackingIo io(BackingIoMode::Buffered);
  Backing b(file_path("inplace_front"), C, 2, {}, 2, &io);
  const Bytes data = pattern(3 * C + 500, 17);  // not inline: block, then data, in group 0
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  for (std::uint64_t off : {std::uint64_t{0}, std::uint64_t{C}}) {
    ContentFile& f = b.reopen();  // a fresh object: the header comes with the first read
    const std::size_t guard = kV2BlockBytes, room_bytes = 4 * C;
    HostBuffer whole = HostBuffer::plain(guard + room_bytes);
    std::memset(whole.data(), 0xCD, guard + room_bytes);
    std::uint8_t* room = whole.data() + guard;
    const std::uint8_t* view = nullptr;
    const std::size_t len = data.size() - off;
    ASSERT_EQ(f.read_view(off, len, &view, room, room_bytes), static_cast<ssize_t>(len)) << off;
    EXPECT_EQ(view, room) << off;
    EXPECT_TRUE(std::equal(view, view + len, data.begin() + static_cast<std::ptrdiff_t>(off))) << off;
    EXPECT_TRUE(std::all_of(whole.data(), whole.data() + guard, [](std::uint8_t x) { return x == 0xCD; }))
        << "bytes in front of the room were written, offset " << off;
  }
}

// An engine whose next open, once armed, ruins its batch where it lies and fails every op: what
// a hybrid engine can leave behind when its GPU fails part-way through an open done in place (the
// fallback then opens bytes the GPU had already overwritten). Everything else is the cpu engine's.
class RuinsOneOpen : public ChunkEngine {
 public:
  std::string name() const override { return "ruins-one-open"; }
  void seal(std::span<ChunkOp> ops) override { cpu_.seal(ops); }
  void open(std::span<ChunkOp> ops) override {
    if (!armed) return cpu_.open(ops);
    armed = false;
    ++ruined;
    for (auto& op : ops) {
      if (op.len) std::memset(op.out, 0x5A, op.len);
      op.ok = false;
    }
  }
  bool armed = false;
  int ruined = 0;

 private:
  CpuEngine cpu_{1};
};

TEST_F(ContentFileTest, FormatTwoReadInPlaceThatFailsIsReadAgainFromDisk) {
  const std::uint32_t C = 4096;
  RuinsOneOpen engine;
  Backing b(file_path("inplace_again"), C, 2, {}, 2, nullptr, &engine);
  const Bytes data = pattern(8 * C, 41);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ContentFile& f = b.reopen();
  HostBuffer room = HostBuffer::plain(8 * C);
  const std::uint8_t* view = nullptr;
  engine.armed = true;
  ASSERT_EQ(f.read_view(0, data.size(), &view, room.data(), 8 * C), static_cast<ssize_t>(data.size()));
  EXPECT_EQ(engine.ruined, 1);
  EXPECT_EQ(view, room.data());
  EXPECT_EQ(Bytes(view, view + data.size()), data);
}

TEST_F(ContentFileTest, WriteBeyondTheFilesystemsLimitFailsWithoutChangingTheFile) {
  // ext4 stops at 16 TiB, tmpfs and others elsewhere: a write far past the end fails (EFBIG or
  // EINVAL from the filesystem) and the file must be what it was, on disk too.
  Backing b(file_path("huge"), 4096);
  const Bytes data = pattern(100, 15);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), 100);
  const std::uint64_t far = 1ull << 60;
  const ssize_t n = b.file->write(far, data.data(), data.size());
  if (n >= 0) GTEST_SKIP() << "the backing filesystem takes files of 2^60 bytes";
  EXPECT_EQ(b.file->plain_size(), 100);
  EXPECT_EQ(b.disk_size(), b.layout.cipher_size(100));
  EXPECT_EQ(b.read_all(*b.file), data);
  EXPECT_EQ(b.read_all(b.reopen()), data);
  EXPECT_LT(b.file->truncate(far), 0);
  EXPECT_EQ(b.read_all(b.reopen()), data);
}

TEST_F(ContentFileTest, HolesReadAsZerosAndTakeNoSpace) {
  const std::uint32_t C = 65536;
  Backing b(file_path("sparse"), C);
  ContentFile& f = *b.file;
  const std::uint64_t size = 64ull * C;  // 4 MiB of plaintext, none of it written
  ASSERT_EQ(f.truncate(size), 0);
  EXPECT_EQ(b.disk_size(), b.layout.cipher_size(size));
  if (b.disk_blocks() * 512 > size / 2) GTEST_SKIP() << "the backing filesystem does not keep files sparse";
  EXPECT_LT(b.disk_blocks() * 512, 64u * 1024);
  Bytes out(3 * C, 0xCC);
  ASSERT_EQ(f.read(10 * C - 5, out.size(), out.data()), static_cast<ssize_t>(out.size()));
  EXPECT_EQ(out, Bytes(out.size(), 0));

  // A write past the end leaves the gap as holes too.
  const Bytes data = pattern(100, 2);
  ASSERT_EQ(f.write(200ull * C, data.data(), data.size()), 100);
  EXPECT_LT(b.disk_blocks() * 512, 4u * C);
  ASSERT_EQ(f.read(150ull * C, C, out.data()), static_cast<ssize_t>(C));
  EXPECT_EQ(Bytes(out.begin(), out.begin() + C), Bytes(C, 0));

  // Writing then punching whole chunks gives the space back, all of it but the two filesystem
  // blocks at the ends of the run (chunks are not block-aligned on disk).
  const std::uint64_t before = b.disk_blocks();
  const Bytes big = pattern(16 * C, 3);
  ASSERT_EQ(f.write(20ull * C, big.data(), big.size()), static_cast<ssize_t>(big.size()));
  const std::uint64_t with_data = b.disk_blocks();
  EXPECT_GE((with_data - before) * 512, 16u * C);
  ASSERT_EQ(f.punch_hole(20ull * C, 16ull * C), 0);
  EXPECT_LE(b.disk_blocks() * 512, before * 512 + 16 * 1024) << "with data: " << with_data * 512;
  ASSERT_EQ(f.read(20ull * C, C, out.data()), static_cast<ssize_t>(C));
  EXPECT_EQ(Bytes(out.begin(), out.begin() + C), Bytes(C, 0));
  EXPECT_EQ(f.plain_size(), static_cast<std::int64_t>(200ull * C + 100));
  // The holes read the same through a fresh object.
  ContentFile& g = b.reopen();
  ASSERT_EQ(g.read(25ull * C, C, out.data()), static_cast<ssize_t>(C));
  EXPECT_EQ(Bytes(out.begin(), out.begin() + C), Bytes(C, 0));
}

TEST_F(ContentFileTest, EveryRewriteOfAChunkGetsAFreshNonceAndTouchesOnlyThatChunk) {
  const std::uint32_t C = 4096;
  Backing b(file_path("nonce"), C);
  ContentFile& f = *b.file;
  const Bytes data = pattern(4 * C, 4);
  ASSERT_EQ(f.write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  const std::uint64_t D = b.layout.disk_chunk_size();
  const Bytes header = b.raw(0, 24);
  std::vector<Bytes> before;
  for (int k = 0; k < 4; ++k) before.push_back(b.raw(b.layout.disk_offset(k), D));
  std::vector<Bytes> nonces_seen;
  for (int round = 0; round < 5; ++round) {
    // The same plaintext again, partially: the chunk is resealed with a new nonce.
    ASSERT_EQ(f.write(2 * C + 10, data.data() + 2 * C + 10, 20), 20);
    const Bytes now = b.raw(b.layout.disk_offset(2), D);
    const Bytes nonce(now.begin(), now.begin() + 12);
    for (const auto& n : nonces_seen) EXPECT_NE(n, nonce);
    EXPECT_NE(nonce, Bytes(before[2].begin(), before[2].begin() + 12));
    EXPECT_NE(now, before[2]);
    nonces_seen.push_back(nonce);
  }
  EXPECT_EQ(b.raw(0, 24), header);  // the file ID, hence the key, stays
  for (int k : {0, 1, 3}) EXPECT_EQ(b.raw(b.layout.disk_offset(k), D), before[k]) << k;
  EXPECT_EQ(b.read_all(f), data);
}

// A rewrite of part of a durable chunk journals that chunk's on-disk bytes before the write as
// its pre-image (the ciphertext the chunk was opened from is reused, not read again): the slot's
// payload, left behind after the record was invalidated, is exactly the old chunk, for a chunk in
// the middle and for a short last chunk, and for a truncation that reseals the new last chunk.
TEST_F(ContentFileTest, PartialRewritesJournalTheChunkAsItWasOnDisk) {
  const std::uint32_t C = 4096;
  Backing b(file_path("preimage"), C);
  auto j = journal_for(b, C);
  ASSERT_TRUE(j);
  ContentFile& f = *b.file;
  const Bytes data = pattern(3 * C + 100, 9);
  ASSERT_EQ(f.write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  f.mark_durable();
  const std::uint64_t D = b.layout.disk_chunk_size();
  auto slot0_payload = [&](std::size_t len) {
    Bytes got(len);
    int jfd = ::open(file_path(kJournalFileName).c_str(), O_RDONLY);
    EXPECT_GE(jfd, 0);
    EXPECT_EQ(::pread(jfd, got.data(), len, kJournalHeaderBlock), static_cast<ssize_t>(len));
    ::close(jfd);
    return got;
  };
  const Bytes old1 = b.raw(b.layout.disk_offset(1), D);
  ASSERT_EQ(f.write(C + 10, data.data(), 20), 20);
  EXPECT_EQ(slot0_payload(D), old1);
  const Bytes old3 = b.raw(b.layout.disk_offset(3), 100 + kChunkOverhead);
  ASSERT_EQ(f.write(3 * C + 5, data.data(), 10), 10);
  EXPECT_EQ(slot0_payload(100 + kChunkOverhead), old3);
  const Bytes old2 = b.raw(b.layout.disk_offset(2), D);
  ASSERT_EQ(f.truncate(2 * C + 50), 0);
  EXPECT_EQ(slot0_payload(D), old2);
  EXPECT_EQ(j->slots_in_use(), 0u);
  Bytes want(data.begin(), data.begin() + 2 * C + 50);
  std::copy(data.begin(), data.begin() + 20, want.begin() + C + 10);
  EXPECT_EQ(b.read_all(f), want);
}

// The journal record of a rewrite names the file by its path under CIPHERDIR, which recovery
// needs; the path is read once and kept until the journal hears that names moved.
TEST_F(ContentFileTest, JournalPathHintFollowsRenamesTheJournalIsToldOf) {
  const std::uint32_t C = 4096;
  Backing b(file_path("f"), C);
  auto j = journal_for(b, C);
  ASSERT_TRUE(j);
  ContentFile& f = *b.file;
  const Bytes data = pattern(2 * C, 11);
  ASSERT_EQ(f.write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  f.mark_durable();
  auto slot0_path = [&] {
    Bytes h(kJournalHeaderBlock);
    int jfd = ::open(file_path(kJournalFileName).c_str(), O_RDONLY);
    EXPECT_GE(jfd, 0);
    EXPECT_EQ(::pread(jfd, h.data(), h.size(), 0), static_cast<ssize_t>(h.size()));
    ::close(jfd);
    const std::uint32_t len = std::uint32_t{h[12]} << 24 | std::uint32_t{h[13]} << 16 | std::uint32_t{h[14]} << 8 | h[15];
    return std::string(reinterpret_cast<const char*>(h.data()) + kJournalRecordHeaderBytes, len);
  };
  ASSERT_EQ(f.write(10, data.data(), 5), 5);
  EXPECT_EQ(slot0_path(), "f");
  ASSERT_EQ(::rename(file_path("f").c_str(), file_path("g").c_str()), 0);
  j->names_changed();
  ASSERT_EQ(f.write(20, data.data(), 5), 5);
  EXPECT_EQ(slot0_path(), "g");
}

TEST_F(ContentFileTest, OnDiskBytesAreExactlyTheDocumentedFormat) {
  // Decrypt the ciphertext file with nothing but FORMAT.md and the primitives: header, content key
  // = HKDF(master, salt = file ID), chunk k = nonce | GCM(AAD = file ID || be64(k)) | tag.
  const std::uint32_t C = 4096;
  Backing b(file_path("format"), C);
  const Bytes data = pattern(3 * C + 777, 14);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  const Bytes raw = b.raw(0, static_cast<std::size_t>(b.disk_size()));
  ASSERT_EQ(raw.size(), 24 + 3 * (C + 28) + 777 + 28);
  ASSERT_EQ(Bytes(raw.begin(), raw.begin() + 8), Bytes({'G', 'C', 'F', 'S', 0, 1, 0, 0}));
  const Bytes id(raw.begin() + 8, raw.begin() + 24);
  const std::string info = "gpucryptfs v1 content AES-256-GCM";
  const SecretBytes key = hkdf_sha256(master_key(), id, Bytes(info.begin(), info.end()), 32);
  Bytes plain;
  std::size_t pos = 24;
  for (std::uint64_t k = 0; pos < raw.size(); ++k) {
    const std::size_t len = std::min<std::size_t>(C, raw.size() - pos - 28);
    Bytes aad = id;
    for (int i = 7; i >= 0; --i) aad.push_back(static_cast<std::uint8_t>(k >> (8 * i)));
    Bytes out(len);
    ASSERT_TRUE(gcm_open(key, std::span(raw).subspan(pos, 12), aad, std::span(raw).subspan(pos + 12, len),
                         std::span(raw).subspan(pos + 12 + len, 16), out.data()))
        << "chunk " << k;
    plain.insert(plain.end(), out.begin(), out.end());
    pos += 12 + len + 16;
  }
  EXPECT_EQ(plain, data);
}

TEST_F(ContentFileTest, CiphertextHoldsNoPlaintext) {
  Backing b(file_path("leak"), 4096);
  const std::string marker = "TOP-SECRET-MARKER-";
  std::string text;
  while (text.size() < 50000) text += marker;
  ASSERT_EQ(b.file->write(0, reinterpret_cast<const std::uint8_t*>(text.data()), text.size()),
            static_cast<ssize_t>(text.size()));
  const Bytes raw = b.raw(0, static_cast<std::size_t>(b.disk_size()));
  const std::string disk(raw.begin(), raw.end());
  EXPECT_EQ(disk.find(marker.substr(0, 8)), std::string::npos);
}

TEST_F(ContentFileTest, TruncateToZeroStartsANewFileId) {
  Backing b(file_path("newid"), 4096);
  ContentFile& f = *b.file;
  const Bytes data = pattern(100, 5);
  ASSERT_EQ(f.write(0, data.data(), data.size()), 100);
  const Bytes h1 = b.raw(0, 24);
  ASSERT_EQ(f.truncate(0), 0);
  ASSERT_EQ(f.write(0, data.data(), data.size()), 100);
  const Bytes h2 = b.raw(0, 24);
  EXPECT_NE(h1, h2);
  EXPECT_EQ(b.read_all(b.reopen()), data);
}

}  // namespace
}  // namespace gcfs
