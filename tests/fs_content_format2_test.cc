// ContentFile in format 2 (aligned chunks, entries apart): the documented bytes decrypted by the
// book, small files, tampering, holes, writes sealed in parts, direct I/O and its fallback.
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

// Decrypts a format 2 file with nothing but FORMAT.md and the primitives.
Bytes decrypt_v2_by_the_book(const Bytes& raw, std::uint64_t C) {
  EXPECT_GE(raw.size(), 24u);
  EXPECT_EQ(Bytes(raw.begin(), raw.begin() + 8), Bytes({'G', 'C', 'F', 'S', 0, 2, 0, 0}));
  const Bytes id(raw.begin() + 8, raw.begin() + 24);
  const std::string info = "gpucryptfs v1 content AES-256-GCM";
  const SecretBytes key = hkdf_sha256(master_key(), id, Bytes(info.begin(), info.end()), 32);
  auto open_chunk = [&](std::uint64_t k, std::size_t entry, std::size_t data, std::size_t len, Bytes* plain) {
    Bytes aad = id;
    for (int i = 7; i >= 0; --i) aad.push_back(static_cast<std::uint8_t>(k >> (8 * i)));
    Bytes out(len);
    EXPECT_TRUE(gcm_open(key, std::span(raw).subspan(entry, 12), aad, std::span(raw).subspan(data, len),
                         std::span(raw).subspan(entry + 12, 16), out.data()))
        << "chunk " << k;
    plain->insert(plain->end(), out.begin(), out.end());
  };
  Bytes plain;
  if (raw.size() <= 4096) {  // inline: entry at 64, ciphertext from 128 to the end
    open_chunk(0, 64, 128, raw.size() - 128, &plain);
    return plain;
  }
  const std::uint64_t G = 4096 + 128 * C;
  for (std::uint64_t k = 0;; ++k) {
    const std::uint64_t g = k / 128, i = k % 128;
    const std::uint64_t data = g * G + 4096 + i * C;
    if (data >= raw.size()) break;
    open_chunk(k, g * G + 64 + i * 28, data, std::min<std::uint64_t>(C, raw.size() - data), &plain);
  }
  return plain;
}

TEST_F(ContentFileTest, FormatTwoOnDiskBytesAreExactlyTheDocumentedFormat) {
  const std::uint32_t C = 4096;
  Backing b(file_path("format2"), C, 2, {}, 2);
  // A small file is inline: header, entry and ciphertext in one block.
  const Bytes small = pattern(100, 3);
  ASSERT_EQ(b.file->write(0, small.data(), small.size()), 100);
  EXPECT_EQ(b.disk_size(), 128u + 100u);
  EXPECT_EQ(decrypt_v2_by_the_book(b.raw(0, static_cast<std::size_t>(b.disk_size())), C), small);
  // Grown past a group: every chunk's ciphertext at its aligned place, entries in their blocks.
  const Bytes data = pattern(130 * C + 777, 14);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  EXPECT_EQ(b.disk_size(), 2 * 4096 + 130 * C + 777);
  EXPECT_EQ(decrypt_v2_by_the_book(b.raw(0, static_cast<std::size_t>(b.disk_size())), C), data);
  // And back to inline by truncation.
  ASSERT_EQ(b.file->truncate(50), 0);
  EXPECT_EQ(b.disk_size(), 128u + 50u);
  EXPECT_EQ(decrypt_v2_by_the_book(b.raw(0, static_cast<std::size_t>(b.disk_size())), C), Bytes(data.begin(), data.begin() + 50));
  EXPECT_EQ(b.read_all(b.reopen()), Bytes(data.begin(), data.begin() + 50));
}

TEST_F(ContentFileTest, FormatTwoSmallFileTakesOneBlock) {
  Backing b(file_path("small2"), 4096, 2, {}, 2);
  const Bytes small = pattern(100, 9);
  ASSERT_EQ(b.file->write(0, small.data(), small.size()), 100);
  ASSERT_EQ(::fsync(b.fd), 0);
  EXPECT_LE(b.disk_blocks() * 512, 4096u);  // as in format 1: one filesystem block
  EXPECT_EQ(b.read_all(b.reopen()), small);
}

TEST_F(ContentFileTest, FormatTwoTamperingFailsOnlyTheChunkTouched) {
  const std::uint32_t C = 4096;
  Backing b(file_path("tamper2"), C, 2, {}, 2);
  const Bytes data = pattern(4 * C, 21);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  const ChunkLayout& L = b.layout;
  const std::uint64_t size = data.size();
  Bytes out(C);
  // A flipped bit in chunk 1's nonce, in chunk 2's tag, in chunk 3's ciphertext.
  for (auto [off, k] : {std::pair{L.nonce_offset(1), 1}, {L.tag_offset(2, size) + 5, 2}, {L.data_offset(3, size) + 100, 3}}) {
    Bytes byte = b.raw(off, 1);
    byte[0] ^= 0x10;
    b.poke(off, byte);
  }
  ContentFile& f = b.reopen();
  EXPECT_EQ(f.read(0, C, out.data()), static_cast<ssize_t>(C));
  EXPECT_EQ(out, Bytes(data.begin(), data.begin() + C));
  for (int k = 1; k < 4; ++k) EXPECT_EQ(f.read(k * C, C, out.data()), -EIO) << k;
  // Entries swapped between two chunks fail too: the AAD binds each chunk to its position.
  Backing b2(file_path("swap2"), C, 2, {}, 2);
  ASSERT_EQ(b2.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  const Bytes e0 = b2.raw(L.nonce_offset(0), 28), e1 = b2.raw(L.nonce_offset(1), 28);
  const Bytes d0 = b2.raw(L.data_offset(0, size), C), d1 = b2.raw(L.data_offset(1, size), C);
  b2.poke(L.nonce_offset(0), e1);
  b2.poke(L.nonce_offset(1), e0);
  b2.poke(L.data_offset(0, size), d1);
  b2.poke(L.data_offset(1, size), d0);
  ContentFile& f2 = b2.reopen();
  EXPECT_EQ(f2.read(0, C, out.data()), -EIO);
  EXPECT_EQ(f2.read(C, C, out.data()), -EIO);
  EXPECT_EQ(f2.read(2 * C, C, out.data()), static_cast<ssize_t>(C));
}

TEST_F(ContentFileTest, FormatTwoPunchedAndGrownChunksAreHolesWhateverTheirEntriesHold) {
  const std::uint32_t C = 4096;
  Backing b(file_path("holes2"), C, 2, {}, 2);
  const Bytes data = pattern(6 * C, 5);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(b.file->punch_hole(C, 2 * C), 0);  // chunks 1 and 2; their entries stay
  ASSERT_EQ(b.file->truncate(4 * C), 0);       // cut chunks 4 and 5 ...
  ASSERT_EQ(b.file->truncate(6 * C), 0);       // ... and grow back over their old entries
  Bytes expect = data;
  std::fill(expect.begin() + C, expect.begin() + 3 * C, 0);
  std::fill(expect.begin() + 4 * C, expect.end(), 0);
  EXPECT_EQ(b.read_all(b.reopen()), expect);
}

TEST_F(ContentFileTest, FormatTwoShortChunksWhoseCiphertextIsZeroAreNotHoles) {
  // One random ciphertext byte is zero once in 256 writes: such a chunk is not a hole (its entry
  // is not zero), and must read back as written.
  Backing b(file_path("short2"), 4096, 2, {}, 2);
  std::mt19937 rng(5);
  int zero_ciphertext = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::uint8_t byte = static_cast<std::uint8_t>(1 + rng() % 255);
    ASSERT_EQ(b.file->truncate(0), 0);
    ASSERT_EQ(b.file->write(0, &byte, 1), 1);
    if (b.raw(128, 1)[0] == 0) ++zero_ciphertext;
    std::uint8_t back = 0;
    ASSERT_EQ(b.reopen().read(0, 1, &back), 1) << i;
    ASSERT_EQ(back, byte) << i;
  }
  EXPECT_GT(zero_ciphertext, 0) << "the case never came up: the test proves nothing";
  // A short last chunk made a hole by growing the file over a stale entry reads as zeros.
  const Bytes data = pattern(3 * 4096 + 100, 6);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(b.file->truncate(2 * 4096), 0);
  ASSERT_EQ(b.file->truncate(3 * 4096 + 5), 0);  // chunk 3: 5 bytes, a hole; its old entry was there
  Bytes expect(data.begin(), data.begin() + 2 * 4096);
  expect.resize(3 * 4096 + 5, 0);
  EXPECT_EQ(b.read_all(b.reopen()), expect);
  // And a short last chunk punched.
  ASSERT_EQ(b.file->write(3 * 4096, data.data(), 5), 5);
  ASSERT_EQ(b.file->punch_hole(3 * 4096, 5), 0);
  EXPECT_EQ(b.read_all(b.reopen()), expect);
}



TEST_F(ContentFileTest, FormatTwoWritesSealedInPartsReadBackExactly) {
  // Large writes cross group boundaries (128 chunks: 512 KiB here) and reach the engine in parts,
  // each written out as soon as it is sealed: by the cpu engine with helpers, and by an engine that
  // hands every part over on its own. Read back, reopened and decrypted by the book, they hold the
  // bytes written.
  const std::uint32_t C = 4096;
  PartByPartEngine by_part;
  CpuEngine helpers(4, 0);
  BackingIo io(BackingIoMode::Direct);
  int n = 0;
  for (ChunkEngine* e : {static_cast<ChunkEngine*>(&by_part), static_cast<ChunkEngine*>(&helpers)}) {
    SCOPED_TRACE(e->name());
    Backing b(file_path(("parts" + std::to_string(n++)).c_str()), C, 2, {}, 2, &io, e);
    auto journal = journal_for(b, C);
    Bytes shadow;
    auto write = [&](std::uint64_t off, std::size_t len, std::uint32_t seed) {
      const Bytes d = pattern(len, seed);
      ASSERT_EQ(b.file->write(off, d.data(), len), static_cast<ssize_t>(len));
      if (shadow.size() < off + len) shadow.resize(off + len, 0);
      std::copy(d.begin(), d.end(), shadow.begin() + static_cast<std::ptrdiff_t>(off));
      ASSERT_EQ(b.read_all(*b.file), shadow);
    };
    write(0, 1u << 20, 1);           // two whole groups into an empty file
    write(1u << 20, 1000001, 2);     // a pure append that ends in a short chunk
    b.file->mark_durable();
    write(300000, 1000000, 3);       // a rewrite of durable chunks across a group's end (journaled)
    write(shadow.size() - 5000, 700001, 4);  // rewrites the last chunk and grows
    EXPECT_EQ(b.disk_size(), b.layout.cipher_size(shadow.size()));
    EXPECT_EQ(decrypt_v2_by_the_book(b.raw(0, b.disk_size()), C), shadow);
    write(shadow.size() + 3 * C + 17, 400000, 5);  // past the end: holes, then new chunks
    EXPECT_EQ(b.disk_size(), b.layout.cipher_size(shadow.size()));
    EXPECT_EQ(b.read_all(b.reopen()), shadow);
  }
  EXPECT_FALSE(io.fell_back());
  EXPECT_GT(by_part.parts(), 30u);  // the writes did go out part by part
}

TEST_F(ContentFileTest, AFileOfAnImpossibleSizeCanStillBeEmptied) {
  // Format 2: chunk 0 cut short as the file grew out of its header block, with nothing to put it
  // back. Reads fail; truncating to zero works, and the file is usable again.
  Backing b(file_path("impossible2"), 4096, 2, {}, 2);
  const Bytes data = pattern(5000, 7);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::ftruncate(b.fd, 4096 + 1000), 0);
  ContentFile& f = b.reopen();
  Bytes out(10);
  EXPECT_EQ(f.read(0, 10, out.data()), -EIO);
  EXPECT_EQ(f.truncate(100), -EIO) << "a size other than zero would keep bytes it cannot read";
  ASSERT_EQ(f.truncate(0), 0);
  ASSERT_EQ(f.write(0, data.data(), 10), 10);
  EXPECT_EQ(b.read_all(b.reopen()), Bytes(data.begin(), data.begin() + 10));
}

// Which pages of the file's first len bytes are in the page cache (mincore, one byte per page;
// bit 0 set: cached). Empty if the file cannot be mapped.
std::vector<unsigned char> cached_pages(int fd, std::size_t len) {
  void* map = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return {};
  std::vector<unsigned char> vec((len + 4095) / 4096);
  if (::mincore(map, len, vec.data()) != 0) vec.clear();
  ::munmap(map, len);
  return vec;
}

TEST_F(ContentFileTest, FormatTwoDirectWritesBypassThePageCache) {
  // Whole chunks written through O_DIRECT are not in the page cache afterwards; the short last
  // chunk and the metadata blocks are (they go buffered). mincore tells which pages are cached.
  const std::uint32_t C = 4096;
  BackingIo io(BackingIoMode::Direct);
  Backing b(file_path("direct"), C, 2, {}, 2, &io);
  const Bytes data = pattern(8 * C + 100, 8);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_FALSE(io.fell_back());
  const std::vector<unsigned char> vec = cached_pages(b.fd, static_cast<std::size_t>(b.disk_size()));
  ASSERT_FALSE(vec.empty());
  EXPECT_TRUE(vec[0] & 1) << "the metadata block is written through the page cache";
  for (std::size_t page = 1; page <= 8; ++page) EXPECT_FALSE(vec[page] & 1) << "chunk data page " << page;
  EXPECT_TRUE(vec[9] & 1) << "the short last chunk is written through the page cache";
  EXPECT_EQ(b.read_all(b.reopen()), data);
}

TEST_F(ContentFileTest, FormatTwoAfterAFallbackEveryFileGoesBuffered) {
  // Once the vault has fallen back (O_DIRECT refused with EINVAL somewhere), no content file
  // opens an O_DIRECT descriptor any more, and reads and writes work as before. The refusal
  // itself is driven through the mount in integration_format2_test (a preload library makes every
  // O_DIRECT open fail, as on a backing filesystem that refuses it).
  BackingIo io(BackingIoMode::Auto);
  io.fall_back("refused in this test");
  EXPECT_TRUE(io.fell_back());
  EXPECT_FALSE(io.want_direct());
  Backing b(file_path("fallback"), 4096, 2, {}, 2, &io);
  const Bytes data = pattern(3 * 4096 + 7, 4);
  ASSERT_EQ(b.file->write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  // The data blocks went through the page cache (with O_DIRECT they would not be there).
  const std::vector<unsigned char> vec = cached_pages(b.fd, static_cast<std::size_t>(b.disk_size()));
  ASSERT_FALSE(vec.empty());
  for (std::size_t page = 1; page <= 3; ++page) EXPECT_TRUE(vec[page] & 1) << "data page " << page;
  EXPECT_EQ(b.read_all(b.reopen()), data);
}

}  // namespace
}  // namespace gcfs
