// The daemon owns the bytes of every request and reply (libfuse's fuse_session_custom_io), on
// both transports; libfuse still parses each request and builds each reply.
//
// Owning them gives three things:
//   - one place where every request is seen before libfuse parses it (dispatch_request): an
//     opcode libfuse 3.14 does not know can be answered there;
//   - the INIT reply can ask for what libfuse 3.14 cannot name: FUSE over io_uring, and requests
//     larger than its 1 MiB cap;
//   - a reply to a request that came on an io_uring ring goes back into that ring entry instead of
//     /dev/fuse (a RingReplySink, set for the thread while it dispatches the entry's request).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

struct fuse_session;
struct fuse_buf;

namespace gcfs::mount {

struct SessionIoOptions {
  // Ask for io_uring in the INIT reply (only when the kernel offers it there).
  bool want_uring = false;
  // Largest READ/WRITE to negotiate (max_write, max_pages, max_readahead).
  std::size_t max_request = 1u << 20;
};

// What INIT settled, read from the reply that went to the kernel.
struct InitOutcome {
  bool answered = false;
  bool kernel_offered_uring = false;
  bool uring_negotiated = false;  // offered, and our reply asked for it
  std::size_t max_write = 0;
  std::size_t max_pages = 0;
};

// Installs the custom io on a mounted session (fd: its /dev/fuse descriptor). One per process.
// Returns 0 or -errno.
int install_session_io(fuse_session* se, int fd, const SessionIoOptions& options);
const InitOutcome& init_outcome();

// Where a reply for a ring entry's request goes. Used by the io_uring transport.
class RingReplySink {
 public:
  virtual ~RingReplySink() = default;
  virtual std::uint64_t unique() const = 0;
  // Takes the reply (iov[0]: fuse_out_header). Returns what writev would, or -1.
  virtual long take_reply(const iovec* iov, int count) = 0;
  // The memory the reply's body goes to (the entry's payload, which the kernel reads from).
  virtual unsigned char* room(std::size_t* bytes) = 0;
};

// Hands one request (as /dev/fuse delivers it) to libfuse. While it runs, a reply on this thread
// to `sink`'s request goes to the sink (may be null: replies go to /dev/fuse).
void dispatch_request(fuse_session* se, const fuse_buf& buf, RingReplySink* sink);

// While this thread dispatches a request from an io_uring entry: the entry's reply memory, where
// a READ handler may put its data so that the reply needs no copy (*bytes: its size). Null
// otherwise (/dev/fuse takes the reply from wherever it is).
unsigned char* reply_room(std::size_t* bytes);

// The receive capacity of this thread's buffer: the custom read fills up to this many bytes
// (libfuse 3.14 would read at most its own 1 MiB + a page, too little for larger requests).
void set_thread_receive_capacity(std::size_t bytes);

}  // namespace gcfs::mount
