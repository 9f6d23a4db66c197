// Where plaintext bytes live in a ciphertext file, and the sizes of each. A file on disk is
//   header (24 bytes) | chunk 0 | chunk 1 | ...
// and chunk k is nonce (12) | ciphertext (up to C) | tag (16), C being the vault's chunk size.
// Only the last chunk may be shorter than C. An empty plaintext file is an empty ciphertext file.
#pragma once

#include <cstdint>
#include <optional>

namespace gcfs {

constexpr std::uint64_t kFileHeaderBytes = 24;
constexpr std::uint64_t kChunkNonceOnDisk = 12;
constexpr std::uint64_t kChunkTagOnDisk = 16;
constexpr std::uint64_t kChunkOverhead = kChunkNonceOnDisk + kChunkTagOnDisk;

struct ChunkRange {
  std::uint64_t first = 0;  // inclusive
  std::uint64_t last = 0;   // inclusive
  std::uint64_t count() const { return last - first + 1; }
};

class ChunkLayout {
 public:
  // base_offset: where the content stream starts in the backing file. 0 for a directory vault's
  // files; a volume container keeps its config block in front of the stream (docs/FORMAT.md).
  explicit ChunkLayout(std::uint32_t chunk_size, std::uint64_t base_offset = 0);

  std::uint64_t chunk_size() const { return c_; }
  std::uint64_t base_offset() const { return base_; }
  std::uint64_t disk_chunk_size() const { return c_ + kChunkOverhead; }

  std::uint64_t chunk_of(std::uint64_t plain_offset) const { return plain_offset / c_; }
  std::uint64_t chunk_start(std::uint64_t chunk) const { return chunk * c_; }
  // Position of chunk k in the backing file (base_offset included).
  std::uint64_t disk_offset(std::uint64_t chunk) const { return base_ + kFileHeaderBytes + chunk * disk_chunk_size(); }

  // The chunks that plaintext bytes [offset, offset + len) touch; len must be > 0.
  ChunkRange chunks_for(std::uint64_t offset, std::uint64_t len) const;
  std::uint64_t chunk_count(std::uint64_t plain_size) const { return (plain_size + c_ - 1) / c_; }
  // Plaintext bytes in chunk k of a file of plain_size bytes (0 if the chunk is past the end).
  std::uint64_t chunk_plain_len(std::uint64_t chunk, std::uint64_t plain_size) const;

  // Sizes of the content stream alone, without base_offset.
  std::uint64_t cipher_size(std::uint64_t plain_size) const;
  // nullopt when no plaintext size produces this ciphertext size: a truncated or damaged file.
  // A file of just a header (a write interrupted after creating it) holds zero bytes.
  std::optional<std::uint64_t> plain_size(std::uint64_t cipher_size) const;
  // What the mount reads a file of cipher_size bytes as: plain_size, or, when the file ends in an
  // incomplete chunk (1 to 28 bytes, no room for its nonce and tag: an append cut short between
  // pages), the whole chunks before it, with the fragment's length in *fragment. nullopt only
  // for a size inside the header.
  std::optional<std::uint64_t> readable_plain_size(std::uint64_t cipher_size, std::uint64_t* fragment = nullptr) const;

 private:
  std::uint64_t c_;
  std::uint64_t base_ = 0;
};

}  // namespace gcfs
