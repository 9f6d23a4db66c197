#include "fs/chunk_io.h"

#include "fs/content/content_format.h"

namespace gcfs {

std::uint64_t chunk_forms_bytes(const ChunkLayout& layout, std::uint64_t first, std::uint64_t last,
                                std::uint64_t plain_size) {
  return (last - first) * (layout.chunk_size() + kChunkOverhead) + layout.chunk_plain_len(last, plain_size) +
         kChunkOverhead;
}

ssize_t read_chunk_forms(int fd, const ChunkLayout& layout, std::uint64_t first, std::uint64_t last,
                         std::uint64_t plain_size, std::uint8_t* out) {
  return layout.content().read_forms(fd, layout, first, last, plain_size, out);
}

int write_chunk_forms(int fd, const ChunkLayout& layout, std::uint64_t first, std::uint64_t plain_size,
                      const std::uint8_t* in, std::size_t len) {
  return layout.content().write_forms(fd, layout, first, plain_size, in, len);
}

}  // namespace gcfs
