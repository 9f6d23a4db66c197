// The bytes of one FUSE request and its reply on an io_uring ring entry, in the shape libfuse
// knows from /dev/fuse. Pure functions, no ring and no session: the unit tests feed them
// malformed headers.
//
// On fetch the kernel splits a request over the entry: fuse_in_header in the header's in_out,
// the opcode's own header (fuse_write_in, ...) in op_in, and every further argument (a WRITE's
// data, a name) in the payload buffer, payload_sz bytes. fuse_in_header.len still counts the whole
// request as /dev/fuse would deliver it, so the op header's size is len - 40 - payload_sz, with no
// table of opcodes. Each entry's payload buffer has room in front of it (kRingPrefixBytes): the
// two headers are copied there, right before the payload, and the request reads as one contiguous
// /dev/fuse request whose data was never moved.
//
// On commit the kernel reads fuse_out_header from in_out and the whole reply body (every out
// argument) from the payload buffer, payload_sz bytes.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "mount/transport/fuse_uring_abi.h"

namespace gcfs::mount {

// Room reserved in front of every payload buffer: at least fuse_in_header (40) plus the largest op
// header (128); a page keeps the payload page-aligned.
inline constexpr std::size_t kRingPrefixBytes = 4096;

struct RingRequest {
  unsigned char* start = nullptr;  // the fuse_in_header, inside the prefix room
  std::size_t bytes = 0;           // header + op header + payload
  std::uint32_t opcode = 0;
  std::uint64_t unique = 0;
  std::string error;  // non-empty: malformed, `start` is null; answer with EIO
};

// Checks a fetched entry and lays its request out in front of `payload` (which must have
// kRingPrefixBytes of writable room before it and `payload_capacity` bytes after).
RingRequest assemble_ring_request(const uring_abi::ReqHeader& header, unsigned char* payload,
                                  std::size_t payload_capacity);

// Writes a reply that libfuse built for /dev/fuse (iov[0]: fuse_out_header, the rest: its body)
// into an entry: out header into in_out, the body into payload (no copy where an iovec already
// points there), payload_sz set. A reply whose body does not fit, or whose first iovec is no
// out header, becomes an EIO reply for the same request. Returns the bytes the reply counted
// (what writev on /dev/fuse would return), or -1 when iov[0] is unusable.
long store_ring_reply(const iovec* iov, int count, uring_abi::ReqHeader* header, unsigned char* payload,
                      std::size_t payload_capacity);

// An EIO answer to the request whose fuse_in_header is in header.in_out (a malformed request, or
// one libfuse let go unanswered): every fetched entry must be committed or the kernel's request
// waits for ever.
void store_ring_error(uring_abi::ReqHeader* header, int error);

// Whether a fetched entry holds a READ through the page cache (the file is not O_DIRECT) of at
// least min_bytes: what the kernel's readahead sends, without the reader waiting for it.
bool is_buffered_read_of(const uring_abi::ReqHeader& header, std::size_t min_bytes);

// FUSE_INIT: whether the kernel's request offers io_uring (the request as /dev/fuse delivers it).
bool init_offers_uring(const void* request, std::size_t bytes);

// FUSE_INIT: whether the kernel's request offers FUSE_HANDLE_KILLPRIV_V2 (protocol 7.33 and
// later): the filesystem clears the setid bits itself where a write, truncate or chown calls for
// it, told so by FUSE_WRITE_KILL_SUIDGID in each write, and the kernel in exchange marks inodes
// without setid bits as such (SB_NOSEC) instead of asking for security.capability before every
// write (a GETXATTR round trip per WRITE request).
bool init_offers_killpriv_v2(const void* request, std::size_t bytes);

// FUSE_INIT's reply body (fuse_init_out, as many bytes as libfuse sends): asks for io_uring when
// `uring` (FUSE_OVER_IO_URING in flags2), for FUSE_HANDLE_KILLPRIV_V2 when `killpriv_v2`, and
// raises max_write, max_pages and max_readahead to `max_request` when that is non-zero and larger
// than libfuse's own cap. Returns false when the body is too short to be a fuse_init_out of
// protocol 7.23 or later (left untouched).
bool patch_init_reply(void* body, std::size_t bytes, bool uring, std::size_t max_request, bool killpriv_v2 = false);

// FUSE_WRITE: the write_flags of its fuse_write_in (the request as /dev/fuse delivers it); 0 for
// any other request, or one too short to hold them.
std::uint32_t write_flags_of(const void* request, std::size_t bytes);

}  // namespace gcfs::mount
