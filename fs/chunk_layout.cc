#include "fs/chunk_layout.h"

#include <algorithm>
#include <stdexcept>

#include "fs/content/content_format.h"

namespace gcfs {

ChunkLayout::ChunkLayout(std::uint32_t chunk_size, std::uint64_t base_offset, int format)
    : c_(chunk_size), base_(base_offset), fmt_(nullptr) {
  if (chunk_size == 0 || (chunk_size & (chunk_size - 1)) != 0)
    throw std::invalid_argument("chunk size must be a power of two");
  fmt_ = &content_format(format);
  fmt_->check_geometry(chunk_size, base_offset);
}

int ChunkLayout::format() const { return fmt_->version(); }
bool ChunkLayout::aligned() const { return fmt_->aligned(); }
bool ChunkLayout::is_inline(std::uint64_t plain_size) const { return fmt_->is_inline(plain_size); }

ChunkRange ChunkLayout::chunks_for(std::uint64_t offset, std::uint64_t len) const {
  if (len == 0) throw std::invalid_argument("chunks_for: empty range");
  return {offset / c_, (offset + len - 1) / c_};
}

std::uint64_t ChunkLayout::chunk_plain_len(std::uint64_t chunk, std::uint64_t plain_size) const {
  const std::uint64_t start = chunk * c_;
  if (start >= plain_size) return 0;
  return std::min(c_, plain_size - start);
}

std::uint64_t ChunkLayout::nonce_offset(std::uint64_t chunk) const { return fmt_->nonce_offset(*this, chunk); }

std::uint64_t ChunkLayout::data_offset(std::uint64_t chunk, std::uint64_t plain_size) const {
  return fmt_->data_offset(*this, chunk, plain_size);
}

std::uint64_t ChunkLayout::tag_offset(std::uint64_t chunk, std::uint64_t plain_size) const {
  return fmt_->tag_offset(*this, chunk, plain_size);
}

std::uint64_t ChunkLayout::cipher_size(std::uint64_t plain_size) const {
  if (plain_size == 0) return 0;
  return fmt_->cipher_size(*this, plain_size);
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
  return fmt_->readable_plain_size(*this, cipher_size, fragment);
}

}  // namespace gcfs
