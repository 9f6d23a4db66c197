// The seam between the transports and the code that answers requests. Each transport hands every
// request it receives to dispatch_request (mount/transport/session_io.h) together with the
// RequestChannel it came on; the dispatch, libfuse and the per-op handlers (mount/daemon/) never
// ask which transport that was. Two implement it:
//   - the classic loop (mount/transport/request_loop.cc): a channel per worker thread, whose
//     replies go to /dev/fuse;
//   - the io_uring queues (mount/transport/uring_rings.h): a channel per ring entry, whose
//     replies go into the entry the request came in.
//
// What belongs to one request travels with it, never in a thread-local: the channel is the
// request's own argument to dispatch_request, and libfuse's replies find their way back to it
// through the request's unique (session_io.cc says how). A channel lives as long as its transport
// and serves one request after another on one thread: nothing is allocated per request.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "mount/daemon/caller_charge.h"

namespace gcfs::mount {

class RequestChannel {
 public:
  RequestChannel(const RequestChannel&) = delete;
  RequestChannel& operator=(const RequestChannel&) = delete;

  // Sends the reply to the request being dispatched: iov[0] is its fuse_out_header (with the
  // request's own unique), the rest its body. Returns what writev would, or -1.
  virtual long send_reply(const iovec* iov, int count) = 0;

  // Where the reply's body may be built so that it is sent without a copy (*bytes: its size): a
  // ring entry's payload, which the kernel reads the reply from. Null, *bytes 0, where a reply may
  // come from any memory (/dev/fuse).
  virtual unsigned char* reply_room(std::size_t* bytes) = 0;

  // Whether libfuse's replies may go straight to /dev/fuse, as libfuse itself would send them (the
  // classic loop). Otherwise each reply libfuse builds is handed to send_reply.
  bool replies_to_dev_fuse() const { return replies_to_dev_fuse_; }

  // The charge of the one thread that serves this channel's requests (mount/daemon/
  // caller_charge.h): space a request allocates is charged to its caller on that thread.
  CallerCharge& charge() { return *charge_; }

  // The unique of the request being dispatched on this channel; kept by dispatch_request.
  std::uint64_t dispatched_unique = 0;

 protected:
  RequestChannel(bool replies_to_dev_fuse, CallerCharge* charge)
      : replies_to_dev_fuse_(replies_to_dev_fuse), charge_(charge) {}
  ~RequestChannel() = default;

 private:
  const bool replies_to_dev_fuse_;
  CallerCharge* const charge_;
};

}  // namespace gcfs::mount
