// Chunk mapping and size translation, at every boundary, for every chunk size the format allows
// (and the tiny ones that make boundaries cheap to enumerate).
#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <set>
#include <vector>
#include <stdexcept>

#include "crypto/key_ring.h"
#include "fs/chunk_layout.h"
#include "fs/file_header.h"

namespace gcfs {
namespace {

// An independent model of FORMAT.md's size rule, written from the text, not from the code.
std::uint64_t model_cipher_size(std::uint64_t plain, std::uint64_t c) {
  if (plain == 0) return 0;
  std::uint64_t chunks = (plain + c - 1) / c;
  return 24 + plain + 28 * chunks;
}

class ChunkLayoutSizes : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(ChunkLayoutSizes, MappingAtBoundaries) {
  const std::uint64_t C = GetParam();
  ChunkLayout L(GetParam());
  EXPECT_EQ(L.chunk_size(), C);
  EXPECT_EQ(L.disk_chunk_size(), C + 28);
  for (std::uint64_t k : {0ull, 1ull, 2ull, 1000ull}) {
    EXPECT_EQ(L.chunk_of(k * C), k);
    EXPECT_EQ(L.chunk_of(k * C + C - 1), k);
    if (k) {
      EXPECT_EQ(L.chunk_of(k * C - 1), k - 1);
    }
    EXPECT_EQ(L.chunk_start(k), k * C);
    EXPECT_EQ(L.disk_offset(k), 24 + k * (C + 28));
  }
  // chunks_for at the edges.
  auto r = L.chunks_for(0, 1);
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.last, 0u);
  r = L.chunks_for(0, C);
  EXPECT_EQ(r.last, 0u);
  EXPECT_EQ(r.count(), 1u);
  r = L.chunks_for(0, C + 1);
  EXPECT_EQ(r.last, 1u);
  r = L.chunks_for(C - 1, 2);
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.last, 1u);
  r = L.chunks_for(C, C);
  EXPECT_EQ(r.first, 1u);
  EXPECT_EQ(r.last, 1u);
  r = L.chunks_for(C - 1, 1);
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.last, 0u);
  r = L.chunks_for(3 * C + 5, 10 * C);
  EXPECT_EQ(r.first, 3u);
  EXPECT_EQ(r.last, 13u);
  EXPECT_EQ(r.count(), 11u);
  EXPECT_THROW(L.chunks_for(5, 0), std::invalid_argument);

  // chunk_count and chunk_plain_len.
  EXPECT_EQ(L.chunk_count(0), 0u);
  EXPECT_EQ(L.chunk_count(1), 1u);
  EXPECT_EQ(L.chunk_count(C - 1), 1u);
  EXPECT_EQ(L.chunk_count(C), 1u);
  EXPECT_EQ(L.chunk_count(C + 1), 2u);
  EXPECT_EQ(L.chunk_count(7 * C), 7u);
  EXPECT_EQ(L.chunk_plain_len(0, 0), 0u);
  EXPECT_EQ(L.chunk_plain_len(0, 1), 1u);
  EXPECT_EQ(L.chunk_plain_len(0, C - 1), C - 1);
  EXPECT_EQ(L.chunk_plain_len(0, C), C);
  EXPECT_EQ(L.chunk_plain_len(1, C), 0u);
  EXPECT_EQ(L.chunk_plain_len(0, C + 1), C);
  EXPECT_EQ(L.chunk_plain_len(1, C + 1), 1u);
  EXPECT_EQ(L.chunk_plain_len(2, C + 1), 0u);
  EXPECT_EQ(L.chunk_plain_len(5, 6 * C), C);
}

TEST_P(ChunkLayoutSizes, SizeTranslationAtBoundaries) {
  const std::uint64_t C = GetParam();
  ChunkLayout L(GetParam());
  const std::uint64_t D = C + 28;
  const std::pair<std::uint64_t, std::uint64_t> cases[] = {
      {0, 0},
      {1, 24 + 28 + 1},
      {C - 1, 24 + 28 + C - 1},
      {C, 24 + D},
      {C + 1, 24 + D + 29},
      {2 * C, 24 + 2 * D},
      {1000 * C + 7, 24 + 1000 * D + 35},
  };
  for (auto [plain, cipher] : cases) {
    SCOPED_TRACE(plain);
    EXPECT_EQ(L.cipher_size(plain), cipher);
    EXPECT_EQ(L.cipher_size(plain), model_cipher_size(plain, C));
    auto back = L.plain_size(cipher);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, plain);
  }
  // A header-only file: a write interrupted right after creating the file holds no bytes.
  EXPECT_EQ(L.plain_size(24), std::optional<std::uint64_t>(0));
  // Large files: no overflow in the arithmetic for a 1 PiB file.
  const std::uint64_t big = 1ull << 50;
  EXPECT_EQ(L.plain_size(L.cipher_size(big)), std::optional<std::uint64_t>(big));
  EXPECT_EQ(L.plain_size(L.cipher_size(big + 1)), std::optional<std::uint64_t>(big + 1));
}

TEST_P(ChunkLayoutSizes, ImpossibleCiphertextSizes) {
  const std::uint64_t C = GetParam();
  ChunkLayout L(GetParam());
  const std::uint64_t D = C + 28;
  for (std::uint64_t s = 1; s < 24; ++s) EXPECT_FALSE(L.plain_size(s).has_value()) << s;
  for (std::uint64_t full : {0ull, 1ull, 2ull, 77ull}) {
    const std::uint64_t base = 24 + full * D;
    // 1..28 bytes after a chunk boundary: a nonce and tag with no room for a single byte.
    for (std::uint64_t rem = 1; rem <= 28; ++rem) EXPECT_FALSE(L.plain_size(base + rem).has_value()) << base + rem;
    EXPECT_TRUE(L.plain_size(base).has_value());
    EXPECT_EQ(L.plain_size(base + 29), std::optional<std::uint64_t>(full * C + 1));
    EXPECT_EQ(L.plain_size(base + D - 1), std::optional<std::uint64_t>(full * C + C - 1));
  }
}

TEST_P(ChunkLayoutSizes, EveryPlainSizeRoundTripsAndEveryCipherSizeIsClassified) {
  // Every size up to four chunks for small chunk sizes; for large ones every size within 64
  // bytes of a chunk boundary, where the arithmetic can go wrong.
  const std::uint64_t C = GetParam();
  const std::uint64_t D = C + 28;
  ChunkLayout L(GetParam());
  const std::uint64_t limit = 4 * C + 3;
  std::set<std::uint64_t> plains, ciphers;
  for (std::uint64_t k = 0; k <= 4; ++k) {
    for (std::uint64_t d = 0; d <= 64; ++d) {
      if (k * C >= d) plains.insert(k * C - d);
      plains.insert(k * C + d);
      if (24 + k * D >= d) ciphers.insert(24 + k * D - d);
      ciphers.insert(24 + k * D + d);
    }
  }
  if (C <= 4096) {
    for (std::uint64_t p = 0; p <= limit; ++p) plains.insert(p);
    for (std::uint64_t s = 0; s <= L.cipher_size(limit); ++s) ciphers.insert(s);
  }
  std::set<std::uint64_t> images;
  std::uint64_t prev_p = 0, prev_s = 0;
  for (std::uint64_t p : plains) {
    const std::uint64_t s = L.cipher_size(p);
    ASSERT_EQ(s, model_cipher_size(p, C));
    if (p) {
      ASSERT_GT(s, prev_s) << "cipher_size must grow with the plaintext size (" << prev_p << " -> " << p << ")";
    }
    prev_p = p;
    prev_s = s;
    ASSERT_EQ(L.plain_size(s), std::optional<std::uint64_t>(p)) << p;
    images.insert(s);
  }
  // A ciphertext size is the image of exactly one plaintext size, or impossible (header-only is
  // the one size that reads as 0 without being what cipher_size(0) gives).
  for (std::uint64_t s : ciphers) {
    auto p = L.plain_size(s);
    if (s == 24) {
      EXPECT_EQ(p, std::optional<std::uint64_t>(0));
    } else if (p.has_value()) {
      EXPECT_EQ(L.cipher_size(*p), s) << s;
    } else {
      EXPECT_EQ(images.count(s), 0u) << s;
      // Impossible exactly when 1..28 bytes follow the last whole chunk, or the header is cut.
      EXPECT_TRUE(s < 24 || ((s - 24) % D >= 1 && (s - 24) % D <= 28)) << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ChunkSizes, ChunkLayoutSizes,
                         ::testing::Values(16u, 64u, 4096u, 65536u, 1024u * 1024u),
                         [](const auto& info) { return "C" + std::to_string(info.param); });

TEST(ChunkLayout, RejectsNonPowersOfTwo) {
  EXPECT_THROW(ChunkLayout(0), std::invalid_argument);
  EXPECT_THROW(ChunkLayout(3), std::invalid_argument);
  EXPECT_THROW(ChunkLayout(4095), std::invalid_argument);
  EXPECT_THROW(ChunkLayout(65537), std::invalid_argument);
}

TEST(FileHeader, EncodeDecodeAndRejects) {
  FileHeader h = FileHeader::random();
  FileHeader h2 = FileHeader::random();
  EXPECT_NE(h.id, h2.id);
  const auto enc = h.encode();
  ASSERT_EQ(enc.size(), 24u);
  // "GCFS" | be16 version 1 | 0 0 | file ID
  EXPECT_EQ(enc[0], 'G');
  EXPECT_EQ(enc[1], 'C');
  EXPECT_EQ(enc[2], 'F');
  EXPECT_EQ(enc[3], 'S');
  EXPECT_EQ(enc[4], 0);
  EXPECT_EQ(enc[5], 1);
  EXPECT_EQ(enc[6], 0);
  EXPECT_EQ(enc[7], 0);
  EXPECT_TRUE(std::equal(h.id.begin(), h.id.end(), enc.begin() + 8));
  auto back = FileHeader::decode(enc);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->id, h.id);
  for (std::size_t i = 0; i < 8; ++i) {
    auto bad = enc;
    bad[i] ^= 1;
    EXPECT_FALSE(FileHeader::decode(bad).has_value()) << i;
  }
  EXPECT_FALSE(FileHeader::decode(std::span(enc).first(23)).has_value());
  EXPECT_FALSE(FileHeader::decode({}).has_value());
}

TEST(FileHeader, ChunkAadIsIdThenBigEndianIndex) {
  FileId id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(i + 1);
  const auto aad = chunk_aad(id, 0x0102030405060708ull);
  ASSERT_EQ(aad.size(), 24u);
  EXPECT_TRUE(std::equal(id.begin(), id.end(), aad.begin()));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(aad[16 + i], i + 1);
  EXPECT_NE(chunk_aad(id, 1), chunk_aad(id, 256));
}


// ---- Format 2 (docs/FORMAT.md, "File contents, version 2") ----

// An independent model of format 2's size rule, from the text: inline up to 3968 bytes at offset
// 128; otherwise, with n chunks, the last one (index n-1, in group g at index i) ends its data
// block: (g + 1) metadata blocks, 128g + i whole data blocks before it, then its bytes.
std::uint64_t model_v2_cipher_size(std::uint64_t plain, std::uint64_t c) {
  if (plain == 0) return 0;
  if (plain <= 3968) return 128 + plain;
  const std::uint64_t last = (plain - 1) / c, g = last / 128, i = last % 128;
  return 4096 * (g + 1) + (128 * g + i) * c + (plain - last * c);
}

class ChunkLayoutV2 : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(ChunkLayoutV2, DataIsAlignedAndEntriesLieInTheirGroupsMetadataBlock) {
  const std::uint64_t C = GetParam();
  for (std::uint64_t base : {0ull, 65536ull}) {
    ChunkLayout L(GetParam(), base, 2);
    EXPECT_EQ(L.format(), 2);
    EXPECT_TRUE(L.aligned());
    const std::uint64_t big = 1000 * C;  // not inline: every chunk at its aligned place
    for (std::uint64_t k : {0ull, 1ull, 127ull, 128ull, 129ull, 255ull, 256ull, 999ull}) {
      const std::uint64_t g = k / 128, i = k % 128;
      const std::uint64_t meta = base + g * (4096 + 128 * C);
      EXPECT_EQ(L.group_of(k), g);
      EXPECT_EQ(L.meta_block_offset(g), meta);
      // Data: 4 KiB-aligned, right after the group's metadata block, chunk after chunk.
      EXPECT_EQ(L.data_offset(k, big), meta + 4096 + i * C) << k;
      EXPECT_EQ(L.data_offset(k, big) % 4096, 0u) << k;
      // Entry: nonce then tag, inside the metadata block, past the 64 bytes that hold the header
      // (group 0) and never overlapping another chunk's entry.
      EXPECT_EQ(L.nonce_offset(k), meta + 64 + i * 28) << k;
      EXPECT_EQ(L.tag_offset(k, big), L.nonce_offset(k) + 12) << k;
      EXPECT_GE(L.nonce_offset(k), meta + 24);
      EXPECT_LE(L.nonce_offset(k) + 28, meta + 4096);
      // The data of a chunk never lies in a metadata block.
      const std::uint64_t in_group = (L.data_offset(k, big) - base) % (4096 + 128 * C);
      EXPECT_GE(in_group, 4096u);
    }
    // Chunk data blocks follow each other without gaps inside a group, and the next group's
    // metadata block sits between chunk 127 and chunk 128.
    EXPECT_EQ(L.data_offset(127, big) + C, L.meta_block_offset(1));
    EXPECT_EQ(L.meta_block_offset(1) + 4096, L.data_offset(128, big));
  }
}

TEST_P(ChunkLayoutV2, SizesFollowTheModelAndRoundTrip) {
  const std::uint64_t C = GetParam();
  ChunkLayout L(GetParam(), 0, 2);
  std::set<std::uint64_t> plains = {0, 1, 2, 100, 3967, 3968, 3969, 4095, 4096, 4097};
  for (std::uint64_t k : {1ull, 2ull, 127ull, 128ull, 129ull, 256ull, 300ull})
    for (std::int64_t d : {-1, 0, 1}) plains.insert(k * C + d);
  for (std::uint64_t p : plains) {
    EXPECT_EQ(L.cipher_size(p), model_v2_cipher_size(p, C)) << p;
    auto back = L.plain_size(L.cipher_size(p));
    ASSERT_TRUE(back.has_value()) << p;
    EXPECT_EQ(*back, p);
    std::uint64_t frag = 99;
    EXPECT_EQ(L.readable_plain_size(L.cipher_size(p), &frag), p);
    EXPECT_EQ(frag, 0u);
    // The last chunk's data ends the file.
    if (p > 0) {
      const std::uint64_t last = (p - 1) / C;
      EXPECT_EQ(L.data_offset(last, p) + L.chunk_plain_len(last, p), L.cipher_size(p)) << p;
    }
  }
}

TEST_P(ChunkLayoutV2, EveryCipherSizeIsClassifiedOnce) {
  // Every ciphertext size up to two groups and a bit either is what exactly one plaintext size
  // makes, or is a metadata-block fragment (a growing write cut short), or is impossible.
  const std::uint64_t C = GetParam();
  if (C > 8192) GTEST_SKIP() << "enumerating every size of two groups of large chunks takes too long";
  ChunkLayout L(GetParam(), 0, 2);
  const std::uint64_t G = 4096 + 128 * C;
  // cipher_size rises with the plaintext size (checked here), so a binary search finds the
  // plaintext size that makes a ciphertext size, if any.
  std::vector<std::uint64_t> cipher_of;  // index: plaintext size
  for (std::uint64_t p = 0; p <= 2 * 128 * C + 3 * C; ++p) {
    cipher_of.push_back(L.cipher_size(p));
    if (p > 0) {
      ASSERT_GT(cipher_of[p], cipher_of[p - 1]) << p;
    }
  }
  for (std::uint64_t s = 0; s <= 2 * G + 3 * C + 4096; ++s) {
    std::uint64_t frag = 0;
    const auto readable = L.readable_plain_size(s, &frag);
    const auto plain = L.plain_size(s);
    auto it = std::lower_bound(cipher_of.begin(), cipher_of.end(), s);
    if (it != cipher_of.end() && *it == s) {
      ASSERT_TRUE(plain.has_value()) << s;
      EXPECT_EQ(*plain, static_cast<std::uint64_t>(it - cipher_of.begin())) << s;
      continue;
    }
    if (s >= 24 && s <= 128) {
      // A header, perhaps with the first entry: no data yet, 0 bytes.
      ASSERT_TRUE(plain.has_value()) << s;
      EXPECT_EQ(*plain, 0u);
      continue;
    }
    EXPECT_FALSE(plain.has_value()) << s;
    if (s < 24) {
      EXPECT_FALSE(readable.has_value()) << s;
    } else if (s % G != 0 && s % G <= 4096 && s > 4096) {
      ASSERT_TRUE(readable.has_value()) << s;
      EXPECT_EQ(frag, s % G);
      EXPECT_EQ(*readable, s / G * 128 * C);
    } else {
      // Chunk 0 at its aligned place holding no more than an inline file would: never written so.
      EXPECT_FALSE(readable.has_value()) << s;
      EXPECT_GT(s, 4096u);
      EXPECT_LE(s, 4096u + 3968u);
    }
  }
}

TEST_P(ChunkLayoutV2, OverheadIsAtMostOnePercentAt64KiBAndSmallFilesTakeOneBlock) {
  const std::uint64_t C = GetParam();
  ChunkLayout L(GetParam(), 0, 2);
  const std::uint64_t p = 1024 * C;  // eight whole groups
  const double overhead = static_cast<double>(L.cipher_size(p) - p) / static_cast<double>(p);
  EXPECT_LE(overhead, 4096.0 / (128.0 * static_cast<double>(C)) + 1e-9) << C;  // one block per 128 chunks
  if (C >= 65536) {
    EXPECT_LT(overhead, 0.01);
  }
  // Small files are inline: one 4 KiB block, header, entry and data together.
  for (std::uint64_t small : {1ull, 100ull, 3968ull}) {
    EXPECT_TRUE(L.is_inline(small));
    EXPECT_EQ(L.data_offset(0, small), 128u);
    EXPECT_LE(L.cipher_size(small), 4096u);
  }
  EXPECT_FALSE(L.is_inline(0));
  EXPECT_FALSE(L.is_inline(3969));
  EXPECT_EQ(L.data_offset(0, 3969), 4096u);
  // Format 1 never stores inline.
  EXPECT_FALSE(ChunkLayout(GetParam()).is_inline(100));
}

INSTANTIATE_TEST_SUITE_P(ChunkSizes, ChunkLayoutV2, ::testing::Values(4096u, 8192u, 65536u, 1024u * 1024u),
                         [](const auto& info) { return "C" + std::to_string(info.param); });

TEST(ChunkLayoutV2Rules, RefusesWhatCannotBeAligned) {
  EXPECT_THROW(ChunkLayout(1024, 0, 2), std::invalid_argument);
  EXPECT_THROW(ChunkLayout(4096, 512, 2), std::invalid_argument);
  EXPECT_THROW(ChunkLayout(4096, 0, 3), std::invalid_argument);
  EXPECT_THROW(ChunkLayout(4096, 0, 0), std::invalid_argument);
  EXPECT_NO_THROW(ChunkLayout(4096, 65536, 2));
  EXPECT_NO_THROW(ChunkLayout(16, 0, 1));  // format 1 keeps every power of two
}

TEST(ChunkLayoutV2Rules, FormatOneOffsetsAreUnchanged) {
  // The part-wise offsets describe format 1's contiguous chunk exactly.
  ChunkLayout L(4096);
  const std::uint64_t p = 10 * 4096 + 5;
  for (std::uint64_t k : {0ull, 1ull, 10ull}) {
    EXPECT_EQ(L.nonce_offset(k), L.disk_offset(k));
    EXPECT_EQ(L.data_offset(k, p), L.disk_offset(k) + 12);
    EXPECT_EQ(L.tag_offset(k, p), L.disk_offset(k) + 12 + L.chunk_plain_len(k, p));
  }
}

TEST(FileHeader, VersionTwoIsItsOwn) {
  FileHeader h = FileHeader::random();
  const auto v2 = h.encode(2);
  EXPECT_EQ(v2[4], 0);
  EXPECT_EQ(v2[5], 2);
  ASSERT_TRUE(FileHeader::decode(v2, 2).has_value());
  EXPECT_EQ(FileHeader::decode(v2, 2)->id, h.id);
  // A vault reads only headers of its own format.
  EXPECT_FALSE(FileHeader::decode(v2, 1).has_value());
  EXPECT_FALSE(FileHeader::decode(h.encode(1), 2).has_value());
  EXPECT_FALSE(FileHeader::decode(v2).has_value());
}

}  // namespace
}  // namespace gcfs
