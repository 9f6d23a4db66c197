#include "fs/chunk_layout.h"

#include <algorithm>
#include <stdexcept>

namespace gcfs {

ChunkLayout::ChunkLayout(std::uint32_t chunk_size, std::uint64_t base_offset) : c_(chunk_size), base_(base_offset) {
  if (chunk_size == 0 || (chunk_size & (chunk_size - 1)) != 0)
    throw std::invalid_argument("chunk size must be a power of two");
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

std::uint64_t ChunkLayout::cipher_size(std::uint64_t plain_size) const {
  if (plain_size == 0) return 0;
  const std::uint64_t full = plain_size / c_;
  const std::uint64_t rem = plain_size % c_;
  return kFileHeaderBytes + full * disk_chunk_size() + (rem ? rem + kChunkOverhead : 0);
}

std::optional<std::uint64_t> ChunkLayout::plain_size(std::uint64_t cipher_size) const {
  if (cipher_size == 0) return 0;
  if (cipher_size < kFileHeaderBytes) return std::nullopt;
  const std::uint64_t body = cipher_size - kFileHeaderBytes;
  const std::uint64_t full = body / disk_chunk_size();
  const std::uint64_t rem = body % disk_chunk_size();
  if (rem == 0) return full * c_;
  if (rem <= kChunkOverhead) return std::nullopt;  // a chunk with no room for any plaintext
  return full * c_ + (rem - kChunkOverhead);
}

std::optional<std::uint64_t> ChunkLayout::readable_plain_size(std::uint64_t cipher_size, std::uint64_t* fragment) const {
  if (fragment) *fragment = 0;
  if (auto p = plain_size(cipher_size)) return p;
  if (cipher_size < kFileHeaderBytes) return std::nullopt;
  const std::uint64_t body = cipher_size - kFileHeaderBytes;
  if (fragment) *fragment = body % disk_chunk_size();
  return body / disk_chunk_size() * c_;
}

}  // namespace gcfs
