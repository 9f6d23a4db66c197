// pread/pwrite that move every byte asked for: loops that retry short transfers and EINTR.
// Kept apart from the content code so that the journal, names, IVs and fsck, which only need to
// move bytes, do not depend on how file contents are encrypted.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace gcfs {

// Return bytes moved or -errno. A read stops early once `enough` bytes are in (a short read past
// them is the end of the file).
ssize_t pread_full(int fd, void* buf, std::size_t len, std::uint64_t off, std::size_t enough = SIZE_MAX);
ssize_t pwrite_full(int fd, const void* buf, std::size_t len, std::uint64_t off);
// a (len_a bytes) then b (len_b bytes) at off, in one pwritev when it is not cut short (a journal
// record's header and payload; a new file's header and its first chunks). Returns len_a + len_b
// or -errno.
ssize_t pwrite2_full(int fd, const std::uint8_t* a, std::size_t len_a, const std::uint8_t* b, std::size_t len_b,
                     std::uint64_t off);

}  // namespace gcfs
