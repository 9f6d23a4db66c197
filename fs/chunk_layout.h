// Where plaintext bytes live in a ciphertext file, and the sizes of each.
//
// Format 1: a file on disk is
//   header (24 bytes) | chunk 0 | chunk 1 | ...
// and chunk k is nonce (12) | ciphertext (up to C) | tag (16), C being the vault's chunk size.
//
// Format 2 (sector-aligned, docs/FORMAT.md "File contents, version 2"): chunk ciphertext sits at
// 4 KiB-aligned offsets, so that it can travel between the disk and the engine's buffers with
// O_DIRECT; each chunk's nonce and tag (its 28-byte *entry*) lie in a 4 KiB metadata block in
// front of its group of 128 chunks:
//   group g = metadata block (4096) | data of chunks 128g .. 128g+127 (C bytes each, aligned)
//   metadata block = 64 bytes (the file header in group 0, zeros elsewhere) | 128 entries (28 each)
// A file of at most kV2InlineMax plaintext bytes is stored *inline* instead: its one chunk's
// ciphertext follows the header block's first entry at offset 128, so a small file costs one
// block and one write, as in format 1.
//
// In both formats only the last chunk may be shorter than C, and an empty plaintext file is an
// empty ciphertext file.
//
// ChunkLayout is the arithmetic every format shares (chunks of C bytes, the base offset); what
// differs by version it asks the vault's ContentFormat (fs/content/content_format.h), which it
// picks when it is made.
#pragma once

#include <cstdint>
#include <optional>

namespace gcfs {

class ContentFormat;

constexpr std::uint64_t kFileHeaderBytes = 24;
constexpr std::uint64_t kChunkNonceOnDisk = 12;
constexpr std::uint64_t kChunkTagOnDisk = 16;
constexpr std::uint64_t kChunkOverhead = kChunkNonceOnDisk + kChunkTagOnDisk;

// Format 2's geometry.
constexpr std::uint64_t kV2BlockBytes = 4096;     // a metadata block; data alignment
constexpr std::uint64_t kV2ChunksPerGroup = 128;  // entries in one metadata block
constexpr std::uint64_t kV2EntriesOffset = 64;    // where a metadata block's entries start
constexpr std::uint64_t kV2InlineOffset = 128;    // where an inline file's ciphertext starts
constexpr std::uint64_t kV2InlineMax = kV2BlockBytes - kV2InlineOffset;  // 3968 plaintext bytes
static_assert(kV2EntriesOffset + kV2ChunksPerGroup * kChunkOverhead <= kV2BlockBytes);
// Format 2's hole rule: a chunk whose ciphertext is all zeros is a hole when it is at least this
// long, whatever its entry holds (entries of punched or cut-off chunks stay behind); a shorter
// one (only a file's last chunk can be) also needs an all-zero entry, since a few random
// ciphertext bytes are all zero too often (one byte: 1 in 256).
constexpr std::uint64_t kV2HoleMinBytes = 16;
inline bool v2_is_hole(bool data_all_zero, std::uint64_t len, bool entry_all_zero) {
  return data_all_zero && (len >= kV2HoleMinBytes || entry_all_zero);
}
static_assert(kV2EntriesOffset + kChunkOverhead <= kV2InlineOffset);

struct ChunkRange {
  std::uint64_t first = 0;  // inclusive
  std::uint64_t last = 0;   // inclusive
  std::uint64_t count() const { return last - first + 1; }
};

class ChunkLayout {
 public:
  // base_offset: where the content stream starts in the backing file. 0 for a directory vault's
  // files; a volume container keeps its config block in front of the stream (docs/FORMAT.md).
  // format: the vault's format version, 1 or 2. Format 2 needs a chunk size that is a multiple
  // of 4096 and a base offset that is one too.
  explicit ChunkLayout(std::uint32_t chunk_size, std::uint64_t base_offset = 0, int format = 1);

  int format() const;
  // The vault's content format, which answers everything that differs by version.
  const ContentFormat& content() const { return *fmt_; }
  bool aligned() const;
  std::uint64_t chunk_size() const { return c_; }
  std::uint64_t base_offset() const { return base_; }
  // Format 1: the bytes one chunk takes on disk, nonce and tag included (C + 28).
  std::uint64_t disk_chunk_size() const { return c_ + kChunkOverhead; }

  std::uint64_t chunk_of(std::uint64_t plain_offset) const { return plain_offset / c_; }
  std::uint64_t chunk_start(std::uint64_t chunk) const { return chunk * c_; }
  // Format 1: position of chunk k in the backing file (base_offset included).
  std::uint64_t disk_offset(std::uint64_t chunk) const { return base_ + kFileHeaderBytes + chunk * disk_chunk_size(); }

  // Where chunk k of a file of plain_size plaintext bytes keeps its parts, in the backing file
  // (base_offset included): its nonce (the tag follows it at +12 in format 2's entry) and its
  // ciphertext. In format 1 the three are contiguous; in format 2 the entry is in the group's
  // metadata block and the ciphertext at an aligned offset, or, for an inline file, at offset 128.
  std::uint64_t nonce_offset(std::uint64_t chunk) const;
  std::uint64_t data_offset(std::uint64_t chunk, std::uint64_t plain_size) const;
  std::uint64_t tag_offset(std::uint64_t chunk, std::uint64_t plain_size) const;
  // Format 2: whether a file of plain_size bytes is stored inline (1..kV2InlineMax bytes).
  bool is_inline(std::uint64_t plain_size) const;
  // Format 2: the group of chunk k, and where a group's metadata block starts (base included).
  std::uint64_t group_of(std::uint64_t chunk) const { return chunk / kV2ChunksPerGroup; }
  std::uint64_t group_bytes() const { return kV2BlockBytes + kV2ChunksPerGroup * c_; }
  std::uint64_t meta_block_offset(std::uint64_t group) const { return base_ + group * group_bytes(); }

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
  // incomplete chunk (format 1: 1 to 28 bytes, no room for its nonce and tag; format 2: a file
  // that ends inside a metadata block, whose chunks' data never came), the whole chunks before
  // it, with the fragment's length in *fragment. nullopt for a size inside the header, and
  // in format 2 for a size no write leaves, complete or cut short.
  std::optional<std::uint64_t> readable_plain_size(std::uint64_t cipher_size, std::uint64_t* fragment = nullptr) const;

 private:
  std::uint64_t c_;
  std::uint64_t base_ = 0;
  const ContentFormat* fmt_;
};

}  // namespace gcfs
