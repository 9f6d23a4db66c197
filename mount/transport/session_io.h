// The daemon owns the bytes of every request and reply (libfuse's fuse_session_custom_io), on
// both transports; libfuse still parses each request and builds each reply.
//
// Owning them gives three things:
//   - one place where every request is seen before libfuse parses it (dispatch_request): an
//     opcode libfuse 3.14 does not know can be answered there;
//   - the INIT reply can ask for what libfuse 3.14 cannot name: FUSE over io_uring, and requests
//     larger than its 1 MiB cap;
//   - a reply to a request that came on an io_uring ring goes back into that ring entry instead of
//     /dev/fuse (the RequestChannel the request was dispatched with: mount/transport/
//     request_channel.h).
#pragma once

#include <fcntl.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "mount/transport/request_channel.h"

struct fuse_session;
struct fuse_buf;
struct fuse_file_info;

namespace gcfs::mount {

struct SessionIoOptions {
  // Ask for io_uring in the INIT reply (only when the kernel offers it there).
  bool want_uring = false;
  // Largest READ/WRITE to negotiate (max_write, max_pages, max_readahead).
  std::size_t max_request = 1u << 20;
  // The filesystem's create handler makes unnamed files (O_TMPFILE): FUSE_TMPFILE, which libfuse
  // 3.14 has no entry for, is handed to it as a CREATE whose flags carry __O_TMPFILE (see
  // dispatch_request). Off: libfuse answers FUSE_TMPFILE with ENOSYS, and the kernel stops asking.
  bool tmpfile_as_create = false;
  // Ask for FUSE_HANDLE_KILLPRIV_V2 (mount/transport/ring_request.h) where the kernel offers it: only for
  // a filesystem whose write handler clears the setid bits when write_kills_suidgid(fi) says so,
  // and whose setattr, open(O_TRUNC) and fallocate apply the setid rules themselves.
  bool killpriv_v2 = false;
  // READs answered here, without libfuse (see dispatch_request); null: libfuse parses them too.
  // Returns the bytes at *data, or -errno; room (room_bytes long, may be null) is where the
  // reply's body goes when the request came on a ring (RequestChannel::reply_room).
  using DirectRead = long (*)(void* ctx, std::uint64_t fh, std::uint64_t off, std::size_t size, unsigned char* room,
                              std::size_t room_bytes, const unsigned char** data);
  DirectRead direct_read = nullptr;
  // WRITEs answered here, the same way, except those that ask for the setid bits to go
  // (FUSE_WRITE_KILL_SUIDGID: libfuse takes those, see write_kills_suidgid). writepage: the
  // kernel's writeback of cached pages (FUSE_WRITE_CACHE). Returns the bytes written or -errno.
  using DirectWrite = long (*)(void* ctx, std::uint64_t fh, std::uint64_t off, const unsigned char* data,
                               std::size_t size, bool writepage);
  DirectWrite direct_write = nullptr;
  void* direct_ctx = nullptr;  // both functions' ctx
};

// What INIT settled, read from the reply that went to the kernel.
struct InitOutcome {
  bool answered = false;
  bool kernel_offered_uring = false;
  bool kernel_offered_killpriv_v2 = false;
  bool uring_negotiated = false;  // offered, and our reply asked for it
  std::size_t max_write = 0;
  std::size_t max_pages = 0;
};

// Installs the custom io on a mounted session (fd: its /dev/fuse descriptor). One per process.
// Returns 0 or -errno.
int install_session_io(fuse_session* se, int fd, const SessionIoOptions& options);
const InitOutcome& init_outcome();

// Hands one request (as /dev/fuse delivers it) to libfuse, or, for a READ or WRITE with
// direct_read or direct_write set, answers it itself: libfuse 3.14 takes its session-wide mutex
// twice for every request (to keep its list of requests that an INTERRUPT may name) and
// allocates one; with 16 threads of random 4 KiB reads, that mutex was about 15% of the daemon's
// time, in futex sleeps (H100 machine). A READ or WRITE needs neither: the daemon never aborts
// one, so an INTERRUPT naming it finds nothing, and libfuse answers it with EAGAIN on its next
// request, which the kernel drops once the request is answered.
// `channel` is where the request came from and where its reply goes: a reply libfuse builds
// finds it through the request's unique, which is the channel's own while libfuse holds a request
// whose channel does not reply to /dev/fuse (and the request's again once dispatch returns).
// FUSE_TMPFILE (with tmpfile_as_create) is rewritten in place into a CREATE whose flags carry
// __O_TMPFILE, so libfuse parses it and its reply (fuse_entry_out + fuse_open_out, the same as
// CREATE's) goes back through the same path as any other; a real CREATE never carries that bit
// (cleared here), so only FUSE_TMPFILE reaches the handler with it.
void dispatch_request(fuse_session* se, const fuse_buf& buf, RequestChannel& channel);

// The rewrite above on the bytes of one request (as /dev/fuse delivers it), without a session:
// true when the request was a FUSE_TMPFILE long enough to carry fuse_create_in and is now a
// CREATE with __O_TMPFILE in its flags. A CREATE loses any __O_TMPFILE bit. Anything else (a
// truncated FUSE_TMPFILE included, which libfuse then answers with ENOSYS) is left as it is.
bool rewrite_tmpfile_as_create(void* request, std::size_t bytes);

// The mark a WRITE carries to its handler when the kernel asks for the setid bits to go
// (FUSE_WRITE_KILL_SUIDGID in its write_flags: the writer lacks CAP_FSETID; the kernel sets it on
// direct writes on every mount, and on buffered ones where FUSE_HANDLE_KILLPRIV_V2 was settled).
// libfuse 3.14 hands a handler a WRITE's fuse_write_in.flags as fi->flags but not its
// write_flags, so dispatch_request sets this bit there: O_EXCL, which a file's flags never hold
// once it is open (the kernel clears it with O_CREAT, O_NOCTTY and O_TRUNC), and which dispatch
// clears from every other WRITE.
inline constexpr std::uint32_t kWriteKillsSuidgidMark = O_EXCL;

// The mark above on the bytes of one request (as /dev/fuse delivers it), without a session: a
// WRITE long enough to carry fuse_write_in.flags gets the mark where its write_flags hold
// FUSE_WRITE_KILL_SUIDGID and loses it otherwise. Anything else is left as it is.
void mark_write_kills_suidgid(void* request, std::size_t bytes);

// In a WRITE handler: whether the kernel asks for the setid bits to go (the mark above).
bool write_kills_suidgid(const fuse_file_info* fi);

// Tells the kernel that inode ino's attributes changed behind its back (a mode the daemon changed
// while serving a request whose reply carries no attributes): it asks for them at the next stat.
void attributes_changed(std::uint64_t ino);

}  // namespace gcfs::mount
