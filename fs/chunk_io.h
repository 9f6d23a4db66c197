// A chunk's *form*: its nonce, ciphertext and tag back to back (nonce | ciphertext | tag), which
// is how format 1 stores it and how the crash journal and fsck handle chunks of either format.
// In format 2 the nonce and tag lie in the group's metadata block and the ciphertext at an
// aligned offset (chunk_layout.h); these functions gather and scatter them, so that code that
// checks or restores chunks needs to know nothing of where they lie. Each format does the
// gathering its own way (fs/content/format_v*.cc); these calls ask the layout's format.
//
// The hole rule of each format holds for forms too: a form that is all zeros is a hole. In
// format 2 a chunk is a hole when its ciphertext is all zeros, whatever its entry holds (entries
// of punched or cut-off chunks stay behind in their metadata block), so the form of such a chunk
// is given with its nonce and tag zeroed.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "fs/chunk_layout.h"

namespace gcfs {

// The bytes of the forms of chunks [first, last] of a file of plain_size plaintext bytes: every
// chunk C + 28 bytes, the last one's plaintext length + 28.
std::uint64_t chunk_forms_bytes(const ChunkLayout& layout, std::uint64_t first, std::uint64_t last,
                                std::uint64_t plain_size);

// Reads the forms of chunks [first, last] (all inside plain_size) into out
// (chunk_forms_bytes long). Returns the bytes read: fewer when the file is shorter than
// plain_size says (the forms then stop at the first chunk cut short), or -errno.
ssize_t read_chunk_forms(int fd, const ChunkLayout& layout, std::uint64_t first, std::uint64_t last,
                         std::uint64_t plain_size, std::uint8_t* out);

// Writes the forms of chunks [first, ...) given back to back in `in` (len bytes, each chunk
// C + 28 but the last) where a file of plain_size bytes keeps them. 0 or -errno.
int write_chunk_forms(int fd, const ChunkLayout& layout, std::uint64_t first, std::uint64_t plain_size,
                      const std::uint8_t* in, std::size_t len);

}  // namespace gcfs
