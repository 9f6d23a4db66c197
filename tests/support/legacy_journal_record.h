// The crash-journal record encoder of the previous release (record version 2, checked by a plain
// SHA-256), copied here as it was, so that tests can write exactly what that release left on
// disk: a genuine journal to recover after an upgrade, or a forged record, since anyone can
// compute this checksum. It writes any field values, in bounds or not. Independent of
// fs/journal_record.cc on purpose: a test that used the code under test to make its legacy input
// would prove nothing about compatibility.
#pragma once

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "crypto/key_ring.h"
#include "fs/chunk_layout.h"

namespace gcfs::testing::legacy_journal {

constexpr std::size_t kChecksumOffset = 88;
constexpr std::size_t kHeaderBytes = 120;
constexpr std::size_t kHeaderBlock = 4096;

struct Fields {
  std::uint16_t version = 2;
  std::uint64_t sequence = 1;
  FileId file_id{};
  std::uint64_t first_chunk = 0;
  std::uint32_t chunk_count = 1;
  std::uint32_t chunk_size = 4096;
  std::uint64_t base_offset = 0;
  std::uint64_t old_cipher_size = 0;
  std::uint64_t new_cipher_size = 0;
  std::uint64_t payload_len = 0;  // as written into the header; the checksum covers min(this, payload.size())
  std::string path;
};

inline void put16(std::uint8_t* p, std::uint16_t v) { p[0] = static_cast<std::uint8_t>(v >> 8), p[1] = static_cast<std::uint8_t>(v); }
inline void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
inline void put64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}

// The previous release's checksum, verbatim: SHA-256 over the header's first 88 bytes, the path
// hint, and each payload chunk's nonce and tag.
inline std::array<std::uint8_t, 32> checksum(const std::uint8_t* header, const std::uint8_t* path, std::size_t path_len,
                                             const std::uint8_t* payload, std::size_t payload_len,
                                             std::uint64_t disk_chunk) {
  std::array<std::uint8_t, 32> d{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned len = 0;
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, header, kChecksumOffset) == 1 && EVP_DigestUpdate(ctx, path, path_len) == 1;
  for (std::uint64_t start = 0; ok && start < payload_len; start += disk_chunk) {
    const std::uint64_t end = std::min<std::uint64_t>(start + disk_chunk, payload_len);
    if (end - start < kChunkOverhead) break;
    ok = EVP_DigestUpdate(ctx, payload + start, kChunkNonceOnDisk) == 1 &&
         EVP_DigestUpdate(ctx, payload + end - kChunkTagOnDisk, kChunkTagOnDisk) == 1;
  }
  ok = ok && EVP_DigestFinal_ex(ctx, d.data(), &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || len != d.size()) throw std::runtime_error("SHA-256 failed");
  return d;
}

// The 4096-byte header block of a slot, as the previous release's ChunkJournal::record wrote it.
inline std::vector<std::uint8_t> header_block(const Fields& f, const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> block(kHeaderBlock, 0);
  std::uint8_t* h = block.data();
  const std::string magic = "GCFSJRNL";
  std::copy(magic.begin(), magic.end(), h);
  put16(h + 8, f.version);
  put32(h + 12, static_cast<std::uint32_t>(f.path.size()));
  put64(h + 16, f.sequence);
  std::copy(f.file_id.begin(), f.file_id.end(), h + 24);
  put64(h + 40, f.first_chunk);
  put32(h + 48, f.chunk_count);
  put32(h + 52, f.chunk_size);
  put64(h + 56, f.base_offset);
  put64(h + 64, f.old_cipher_size);
  put64(h + 72, f.new_cipher_size);
  put64(h + 80, f.payload_len);
  std::copy(f.path.begin(), f.path.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(f.path.size(), kHeaderBlock - kHeaderBytes)),
            h + kHeaderBytes);
  const auto sum = checksum(h, h + kHeaderBytes, std::min<std::size_t>(f.path.size(), kHeaderBlock - kHeaderBytes),
                            payload.data(), std::min<std::size_t>(f.payload_len, payload.size()),
                            std::uint64_t{f.chunk_size} + kChunkOverhead);
  std::copy(sum.begin(), sum.end(), h + kChecksumOffset);
  return block;
}

}  // namespace gcfs::testing::legacy_journal
