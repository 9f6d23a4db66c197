#include "fs/chunk_layout.h"

#include <algorithm>
#include <stdexcept>

namespace gcfs {

ChunkLayout::ChunkLayout(std::uint32_t chunk_size, std::uint64_t base_offset, int format)
    : c_(chunk_size), base_(base_offset), format_(format) {
  if (chunk_size == 0 || (chunk_size & (chunk_size - 1)) != 0)
    throw std::invalid_argument("chunk size must be a power of two");
  if (format != 1 && format != 2) throw std::invalid_argument("unknown content format " + std::to_string(format));
  if (format == 2 && (chunk_size % kV2BlockBytes != 0 || base_offset % kV2BlockBytes != 0))
    throw std::invalid_argument("format 2 needs chunks and a base offset aligned to 4096 bytes");
}

ChunkRange ChunkLayout::chunks_for(std::uint64_t offset, std::uint64_t len) const {
  if (len == 0) throw std::invalid_argument("chunks_for: empty range");
  return {offset / c_, (offset + len - 1) / c_};
}

std::uint64_t ChunkLayout::chunk_plain_len(std::uint64_t chunk, std::uint64_t plain_size) const {
  const std::uint64_t start = chunk * c_;
  if (start >= plain_size) return 0;
  return std::min(c_, plain_size - start);
}

std::uint64_t ChunkLayout::nonce_offset(std::uint64_t chunk) const {
  if (format_ == 1) return disk_offset(chunk);
  return meta_block_offset(group_of(chunk)) + kV2EntriesOffset + (chunk % kV2ChunksPerGroup) * kChunkOverhead;
}

std::uint64_t ChunkLayout::data_offset(std::uint64_t chunk, std::uint64_t plain_size) const {
  if (format_ == 1) return disk_offset(chunk) + kChunkNonceOnDisk;
  if (chunk == 0 && is_inline(plain_size)) return base_ + kV2InlineOffset;
  return meta_block_offset(group_of(chunk)) + kV2BlockBytes + (chunk % kV2ChunksPerGroup) * c_;
}

std::uint64_t ChunkLayout::tag_offset(std::uint64_t chunk, std::uint64_t plain_size) const {
  if (format_ == 1) return data_offset(chunk, plain_size) + chunk_plain_len(chunk, plain_size);
  return nonce_offset(chunk) + kChunkNonceOnDisk;
}

std::uint64_t ChunkLayout::cipher_size(std::uint64_t plain_size) const {
  if (plain_size == 0) return 0;
  if (format_ == 1) {
    const std::uint64_t full = plain_size / c_;
    const std::uint64_t rem = plain_size % c_;
    return kFileHeaderBytes + full * disk_chunk_size() + (rem ? rem + kChunkOverhead : 0);
  }
  if (is_inline(plain_size)) return kV2InlineOffset + plain_size;
  const std::uint64_t last = (plain_size - 1) / c_;
  return data_offset(last, plain_size) - base_ + chunk_plain_len(last, plain_size);
}

std::optional<std::uint64_t> ChunkLayout::plain_size(std::uint64_t cipher_size) const {
  std::uint64_t fragment = 0;
  auto p = readable_plain_size(cipher_size, &fragment);
  if (!p || fragment) return std::nullopt;
  return p;
}

std::optional<std::uint64_t> ChunkLayout::readable_plain_size(std::uint64_t cipher_size, std::uint64_t* fragment) const {
  if (fragment) *fragment = 0;
  if (cipher_size == 0) return 0;
  if (cipher_size < kFileHeaderBytes) return std::nullopt;
  if (format_ == 1) {
    const std::uint64_t body = cipher_size - kFileHeaderBytes;
    const std::uint64_t full = body / disk_chunk_size();
    const std::uint64_t rem = body % disk_chunk_size();
    if (rem > kChunkOverhead) return full * c_ + (rem - kChunkOverhead);
    // rem == 0: whole chunks. 1..28: an incomplete chunk, no room for any plaintext.
    if (fragment) *fragment = rem;
    return full * c_;
  }
  // Format 2. The header block: a header alone (and up to the first entry) holds nothing; past
  // the inline offset, an inline file.
  if (cipher_size <= kV2InlineOffset) return 0;
  if (cipher_size <= kV2BlockBytes) return cipher_size - kV2InlineOffset;
  const std::uint64_t G = group_bytes();
  const std::uint64_t g = cipher_size / G, r = cipher_size % G;
  if (r == 0) return g * kV2ChunksPerGroup * c_;  // ends with a full group
  if (r <= kV2BlockBytes) {
    // Ends inside group g's metadata block (g >= 1: g = 0 is the inline case above): a growing
    // write whose entries landed and whose data did not. The groups before it are whole.
    if (fragment) *fragment = r;
    return g * kV2ChunksPerGroup * c_;
  }
  const std::uint64_t plain = g * kV2ChunksPerGroup * c_ + (r - kV2BlockBytes);
  // Chunk data at its aligned place is never that of a file small enough to be inline: such a
  // size is a write from inline to aligned cut short (the crash journal puts it back) or damage.
  if (plain <= kV2InlineMax) return std::nullopt;
  return plain;
}

}  // namespace gcfs
