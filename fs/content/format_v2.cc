// Format 2's geometry, chunk forms, journal recovery, master-key probe and fsck answers
// (format_v2.h). A chunk's form is gathered from its entry and its data block, and scattered back
// the same way, entry first.
#include "fs/content/format_v2.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <stdexcept>

#include "crypto/aes_gcm.h"
#include "crypto/secret.h"
#include "crypto/vault_config.h"
#include "fs/chunk_auth.h"
#include "fs/chunk_io.h"
#include "fs/plain_io.h"

namespace gcfs {

const ContentFormat& content_format_v2() {
  static const ContentFormatV2 format;
  return format;
}

void gather_v2_form(const std::uint8_t* data, const std::uint8_t* entry, std::uint64_t len, std::uint8_t* form) {
  if (v2_is_hole(all_zero(data, len), len, all_zero(entry, kChunkOverhead))) {
    std::memset(form, 0, len + kChunkOverhead);  // a hole (chunk_layout.h: kV2HoleMinBytes)
    return;
  }
  std::memcpy(form, entry, kChunkNonceOnDisk);
  std::memcpy(form + kChunkNonceOnDisk, data, len);
  std::memcpy(form + kChunkNonceOnDisk + len, entry + kChunkNonceOnDisk, kChunkTagOnDisk);
}

void ContentFormatV2::check_geometry(std::uint64_t chunk_size, std::uint64_t base_offset) const {
  if (chunk_size % kV2BlockBytes != 0 || base_offset % kV2BlockBytes != 0)
    throw std::invalid_argument("format 2 needs chunks and a base offset aligned to 4096 bytes");
}

std::uint64_t ContentFormatV2::nonce_offset(const ChunkLayout& l, std::uint64_t chunk) const {
  return l.meta_block_offset(l.group_of(chunk)) + kV2EntriesOffset + (chunk % kV2ChunksPerGroup) * kChunkOverhead;
}

std::uint64_t ContentFormatV2::data_offset(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const {
  if (chunk == 0 && is_inline(plain_size)) return l.base_offset() + kV2InlineOffset;
  return l.meta_block_offset(l.group_of(chunk)) + kV2BlockBytes + (chunk % kV2ChunksPerGroup) * l.chunk_size();
}

std::uint64_t ContentFormatV2::tag_offset(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t) const {
  return nonce_offset(l, chunk) + kChunkNonceOnDisk;
}

std::uint64_t ContentFormatV2::cipher_size(const ChunkLayout& l, std::uint64_t plain_size) const {
  if (is_inline(plain_size)) return kV2InlineOffset + plain_size;
  const std::uint64_t last = (plain_size - 1) / l.chunk_size();
  return data_offset(l, last, plain_size) - l.base_offset() + l.chunk_plain_len(last, plain_size);
}

std::optional<std::uint64_t> ContentFormatV2::readable_plain_size(const ChunkLayout& l, std::uint64_t cipher_size,
                                                                  std::uint64_t* fragment) const {
  // The header block: a header alone (and up to the first entry) holds nothing; past the inline
  // offset, an inline file.
  if (cipher_size <= kV2InlineOffset) return 0;
  if (cipher_size <= kV2BlockBytes) return cipher_size - kV2InlineOffset;
  const std::uint64_t G = l.group_bytes(), C = l.chunk_size();
  const std::uint64_t g = cipher_size / G, r = cipher_size % G;
  if (r == 0) return g * kV2ChunksPerGroup * C;  // ends with a full group
  if (r <= kV2BlockBytes) {
    // Ends inside group g's metadata block (g >= 1: g = 0 is the inline case above): a growing
    // write whose entries landed and whose data did not. The groups before it are whole.
    if (fragment) *fragment = r;
    return g * kV2ChunksPerGroup * C;
  }
  const std::uint64_t plain = g * kV2ChunksPerGroup * C + (r - kV2BlockBytes);
  // Chunk data at its aligned place is never that of a file small enough to be inline: such a
  // size is a write from inline to aligned cut short (the crash journal puts it back) or damage.
  if (plain <= kV2InlineMax) return std::nullopt;
  return plain;
}

DiskRange ContentFormatV2::reserve_range(const ChunkLayout& l, ChunkRange r) const {
  // From the metadata block of the first chunk's group to the last chunk's aligned data block
  // (an inline file's chunk too, should it grow out of block 0), in one range; it may reserve
  // some chunks before the first of its group, which then read as holes still.
  return {l.meta_block_offset(l.group_of(r.first)), data_offset(l, r.last, ~std::uint64_t{0}) + l.chunk_size()};
}

DiskRange ContentFormatV2::hole_range(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const {
  // The ciphertext alone: the entry stays behind and is ignored (prepare_hole zeros it for a
  // chunk shorter than kV2HoleMinBytes).
  const std::uint64_t b = data_offset(l, chunk, plain_size);
  return {b, b + l.chunk_plain_len(chunk, plain_size)};
}

std::uint64_t ContentFormatV2::read_scratch_bytes(const ChunkLayout& l, std::uint64_t chunks) const {
  return chunks * l.disk_chunk_size() + kV2BlockBytes;  // a metadata block is read in front of the data
}

ssize_t ContentFormatV2::read_forms(int fd, const ChunkLayout& layout, std::uint64_t first, std::uint64_t last,
                                    std::uint64_t plain_size, std::uint8_t* out) const {
  const std::uint64_t C = layout.chunk_size(), D = C + kChunkOverhead;
  // Per thread, not per call: a rewrite journals its pre-image through here on every request.
  thread_local std::vector<std::uint8_t> entries, data;
  std::uint64_t done = 0;
  for (std::uint64_t a = first; a <= last;) {
    // One group at a time: its entries in one read, its chunks' data in another.
    const std::uint64_t b = std::min(last, (layout.group_of(a) + 1) * kV2ChunksPerGroup - 1);
    const std::uint64_t n = b - a + 1;
    entries.resize(n * kChunkOverhead);
    ssize_t r = pread_full(fd, entries.data(), entries.size(), nonce_offset(layout, a));
    if (r < 0) return r;
    if (static_cast<std::uint64_t>(r) != entries.size()) return static_cast<ssize_t>(done);
    const std::uint64_t data_len = (n - 1) * C + layout.chunk_plain_len(b, plain_size);
    data.resize(data_len);
    r = pread_full(fd, data.data(), data_len, data_offset(layout, a, plain_size));
    if (r < 0) return r;
    const std::uint64_t got = static_cast<std::uint64_t>(r);
    for (std::uint64_t k = a; k <= b; ++k) {
      const std::uint64_t len = layout.chunk_plain_len(k, plain_size);
      const std::uint64_t at = (k - a) * C;
      if (got < at + len) return static_cast<ssize_t>(done);  // the file ends inside this chunk
      gather_v2_form(data.data() + at, entries.data() + (k - a) * kChunkOverhead, len, out + (k - first) * D);
      done += len + kChunkOverhead;
    }
    a = b + 1;
  }
  return static_cast<ssize_t>(done);
}

int ContentFormatV2::write_forms(int fd, const ChunkLayout& layout, std::uint64_t first, std::uint64_t plain_size,
                                 const std::uint8_t* in, std::size_t len) const {
  const std::uint64_t D = layout.chunk_size() + kChunkOverhead;
  for (std::uint64_t at = 0, k = first; at < len; at += D, ++k) {
    const std::uint64_t form = std::min<std::uint64_t>(D, len - at);
    if (form < kChunkOverhead) return -EINVAL;
    const std::uint64_t plen = form - kChunkOverhead;
    const std::uint8_t* f = in + at;
    // The entry first, then the ciphertext: the order a write takes (format_v2_io.cc).
    std::uint8_t entry[kChunkOverhead];
    std::memcpy(entry, f, kChunkNonceOnDisk);
    std::memcpy(entry + kChunkNonceOnDisk, f + kChunkNonceOnDisk + plen, kChunkTagOnDisk);
    ssize_t w = pwrite_full(fd, entry, sizeof entry, nonce_offset(layout, k));
    if (w < 0) return static_cast<int>(w);
    w = pwrite_full(fd, f + kChunkNonceOnDisk, plen, data_offset(layout, k, plain_size));
    if (w < 0) return static_cast<int>(w);
  }
  return 0;
}

StoredChunk ContentFormatV2::stored_chunk(int fd, const ChunkLayout& layout, std::uint64_t S, std::uint64_t k,
                                          std::vector<std::uint8_t>* form) const {
  // The chunk's form gathered from its entry and data block.
  if (S < layout.base_offset() + kFileHeaderBytes) return StoredChunk::Absent;
  std::uint64_t fragment = 0;
  const auto readable = layout.readable_plain_size(S - layout.base_offset(), &fragment);
  if (!readable) return k == 0 ? StoredChunk::Torn : StoredChunk::Absent;  // chunk 0 cut short leaving block 0
  const std::uint64_t len = layout.chunk_plain_len(k, *readable);
  if (len == 0) {
    // Past the whole chunks: absent, unless a torn growing write left part of its data there.
    return data_offset(layout, k, ~std::uint64_t{0}) < S && !fragment ? StoredChunk::Torn : StoredChunk::Absent;
  }
  form->resize(len + kChunkOverhead);
  if (read_forms(fd, layout, k, k, *readable, form->data()) != static_cast<ssize_t>(form->size()))
    return StoredChunk::Torn;
  return StoredChunk::Form;
}

std::optional<std::uint64_t> ContentFormatV2::restore_size(const ChunkLayout& layout,
                                                           std::uint64_t old_cipher_size) const {
  // A pre-image goes back where the file, at its size before the write, kept that chunk (chunk 0
  // of a small file lies in the header block, else at its aligned place).
  if (old_cipher_size < layout.base_offset()) return std::nullopt;
  return layout.plain_size(old_cipher_size - layout.base_offset());  // none: no write starts from such a size
}

FirstChunkProbe ContentFormatV2::probe_first_chunk(int fd, std::uint64_t size, const KeyRing& keys) const {
  FirstChunkProbe p;
  std::array<std::uint8_t, kFileHeaderBytes> raw{};
  if (size <= kV2InlineOffset || ::pread(fd, raw.data(), raw.size(), 0) != static_cast<ssize_t>(raw.size())) return p;
  const auto header = FileHeader::decode(raw, 2);
  if (!header) return p;
  p.mine = true;  // its header says so: the first chunk's entry and data lie where format 2 keeps them
  std::array<std::uint8_t, kChunkOverhead> entry{};
  if (::pread(fd, entry.data(), entry.size(), static_cast<off_t>(kV2EntriesOffset)) != static_cast<ssize_t>(entry.size()))
    return p;
  if (std::all_of(entry.begin(), entry.end(), [](std::uint8_t b) { return b == 0; })) return p;  // a hole
  // Inline (one block): its only chunk lies at 128 whatever the chunk size; else chunk 0 lies at
  // 4096 and is C bytes long, or the rest of a file shorter than that.
  const bool is_inline = size <= kV2BlockBytes;
  const std::uint64_t at = is_inline ? kV2InlineOffset : kV2BlockBytes;
  const std::uint64_t rest = size - at;
  std::vector<std::uint8_t> data(static_cast<std::size_t>(std::min<std::uint64_t>(rest, kMaxChunkSize)));
  std::size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(at + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got != data.size()) return p;
  if (std::all_of(data.begin(), data.end(), [](std::uint8_t b) { return b == 0; })) return p;  // a hole
  p.usable = true;
  const ChunkKey key = keys.content_key(header->id);
  const auto aad = chunk_aad(header->id, 0);
  std::vector<std::uint8_t> plain;
  for (std::uint32_t c = kMinChunkSize; c <= kMaxChunkSize; c *= 2) {
    const std::size_t body = static_cast<std::size_t>(std::min<std::uint64_t>(rest, c));
    plain.resize(body);
    if (gcm_open(key.bytes, std::span(entry.data(), kChunkNonceOnDisk), aad, std::span(data.data(), body),
                 std::span(entry.data() + kChunkNonceOnDisk, kChunkTagOnDisk), plain.data()))
      p.sizes.push_back(c);
  }
  secure_wipe(plain.data(), plain.size());
  p.pinned = !is_inline && p.sizes.size() == 1 && rest > p.sizes.front();
  return p;
}

std::uint64_t ContentFormatV2::next_data_chunk(const ChunkLayout& layout, int fd, std::uint64_t first,
                                               std::uint64_t nchunks) const {
  // The first chunk whose ciphertext block may hold data. A metadata block holds data (its
  // entries) whenever its group was written, so data found there counts from the group's first
  // chunk.
  if (nchunks <= 1) return first;  // one chunk (perhaps inline, in block 0): just read it
  const std::uint64_t from = data_offset(layout, first, ~std::uint64_t{0});
  const off_t at = ::lseek(fd, static_cast<off_t>(from), SEEK_DATA);
  if (at < 0) return errno == ENXIO ? nchunks : first;
  const std::uint64_t data = static_cast<std::uint64_t>(at);
  if (data <= from) return first;
  const std::uint64_t rel = data - layout.base_offset(), G = layout.group_bytes();
  const std::uint64_t in_group = rel % G;
  const std::uint64_t k = rel / G * kV2ChunksPerGroup +
                          (in_group < kV2BlockBytes ? 0 : (in_group - kV2BlockBytes) / layout.chunk_size());
  return std::min(nchunks, std::max(first, k));
}

}  // namespace gcfs
