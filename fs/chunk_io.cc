#include "fs/chunk_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "fs/chunk_auth.h"
#include "fs/plain_io.h"

namespace gcfs {

std::uint64_t chunk_forms_bytes(const ChunkLayout& layout, std::uint64_t first, std::uint64_t last,
                                std::uint64_t plain_size) {
  return (last - first) * (layout.chunk_size() + kChunkOverhead) + layout.chunk_plain_len(last, plain_size) +
         kChunkOverhead;
}

ssize_t read_chunk_forms(int fd, const ChunkLayout& layout, std::uint64_t first, std::uint64_t last,
                         std::uint64_t plain_size, std::uint8_t* out) {
  const std::uint64_t total = chunk_forms_bytes(layout, first, last, plain_size);
  if (layout.format() == 1) return pread_full(fd, out, total, layout.disk_offset(first));
  const std::uint64_t C = layout.chunk_size(), D = C + kChunkOverhead;
  // Per thread, not per call: a rewrite journals its pre-image through here on every request.
  thread_local std::vector<std::uint8_t> entries, data;
  std::uint64_t done = 0;
  for (std::uint64_t a = first; a <= last;) {
    // One group at a time: its entries in one read, its chunks' data in another.
    const std::uint64_t b = std::min(last, (layout.group_of(a) + 1) * kV2ChunksPerGroup - 1);
    const std::uint64_t n = b - a + 1;
    entries.resize(n * kChunkOverhead);
    ssize_t r = pread_full(fd, entries.data(), entries.size(), layout.nonce_offset(a));
    if (r < 0) return r;
    if (static_cast<std::uint64_t>(r) != entries.size()) return static_cast<ssize_t>(done);
    const std::uint64_t data_len = (n - 1) * C + layout.chunk_plain_len(b, plain_size);
    data.resize(data_len);
    r = pread_full(fd, data.data(), data_len, layout.data_offset(a, plain_size));
    if (r < 0) return r;
    const std::uint64_t got = static_cast<std::uint64_t>(r);
    for (std::uint64_t k = a; k <= b; ++k) {
      const std::uint64_t len = layout.chunk_plain_len(k, plain_size);
      const std::uint64_t at = (k - a) * C;
      if (got < at + len) return static_cast<ssize_t>(done);  // the file ends inside this chunk
      std::uint8_t* f = out + (k - first) * D;
      const std::uint8_t* e = entries.data() + (k - a) * kChunkOverhead;
      if (v2_is_hole(all_zero(data.data() + at, len), len, all_zero(e, kChunkOverhead))) {
        std::memset(f, 0, len + kChunkOverhead);  // a hole (chunk_layout.h: kV2HoleMinBytes)
      } else {
        std::memcpy(f, e, kChunkNonceOnDisk);
        std::memcpy(f + kChunkNonceOnDisk, data.data() + at, len);
        std::memcpy(f + kChunkNonceOnDisk + len, e + kChunkNonceOnDisk, kChunkTagOnDisk);
      }
      done += len + kChunkOverhead;
    }
    a = b + 1;
  }
  return static_cast<ssize_t>(done);
}

int write_chunk_forms(int fd, const ChunkLayout& layout, std::uint64_t first, std::uint64_t plain_size,
                      const std::uint8_t* in, std::size_t len) {
  if (layout.format() == 1) {
    const ssize_t w = pwrite_full(fd, in, len, layout.disk_offset(first));
    return w < 0 ? static_cast<int>(w) : 0;
  }
  const std::uint64_t D = layout.chunk_size() + kChunkOverhead;
  for (std::uint64_t at = 0, k = first; at < len; at += D, ++k) {
    const std::uint64_t form = std::min<std::uint64_t>(D, len - at);
    if (form < kChunkOverhead) return -EINVAL;
    const std::uint64_t plen = form - kChunkOverhead;
    const std::uint8_t* f = in + at;
    // The entry first, then the ciphertext: the order a write takes (content_file.cc).
    std::uint8_t entry[kChunkOverhead];
    std::memcpy(entry, f, kChunkNonceOnDisk);
    std::memcpy(entry + kChunkNonceOnDisk, f + kChunkNonceOnDisk + plen, kChunkTagOnDisk);
    ssize_t w = pwrite_full(fd, entry, sizeof entry, layout.nonce_offset(k));
    if (w < 0) return static_cast<int>(w);
    w = pwrite_full(fd, f + kChunkNonceOnDisk, plen, layout.data_offset(k, plain_size));
    if (w < 0) return static_cast<int>(w);
  }
  return 0;
}

}  // namespace gcfs
