#include "mount/transport/session_io.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "mount/daemon/caller_charge.h"
#include "mount/fuse_api.h"
#include "mount/transport/fuse_tmpfile_abi.h"
#include "mount/transport/ring_request.h"

namespace gcfs::mount {
namespace {

SessionIoOptions g_options;
InitOutcome g_init;
fuse_session* g_session = nullptr;
int g_fd = -1;  // the session's /dev/fuse descriptor

thread_local RingReplySink* t_sink = nullptr;
thread_local std::size_t t_receive_capacity = 0;
// The INIT request being dispatched on this thread (its reply is built there, synchronously).
thread_local std::uint64_t t_init_unique = 0;
// The write_flags of the FUSE_WRITE being dispatched on this thread (0 for anything else).
thread_local std::uint32_t t_write_flags = 0;

ssize_t read_request(int fd, void* buf, std::size_t len, void*) {
  // libfuse asks for its own buffer size; the buffer is ours and may be larger.
  const std::size_t n = t_receive_capacity > len ? t_receive_capacity : len;
  return ::read(fd, buf, n);
}

// INIT's reply: asks for io_uring and larger requests, and notes what was settled.
ssize_t write_init_reply(int fd, iovec* iov, int count) {
  std::vector<unsigned char> body;
  for (int i = 1; i < count; ++i) {
    const auto* p = static_cast<const unsigned char*>(iov[i].iov_base);
    body.insert(body.end(), p, p + iov[i].iov_len);
  }
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof out);
  const bool uring = g_options.want_uring && g_init.kernel_offered_uring;
  const bool killpriv_v2 = g_options.killpriv_v2 && g_init.kernel_offered_killpriv_v2;
  if (out.error == 0 && patch_init_reply(body.data(), body.size(), uring, g_options.max_request, killpriv_v2)) {
    fuse_init_out init;
    std::memcpy(&init, body.data(), offsetof(fuse_init_out, unused));
    g_init.uring_negotiated = uring;
    g_init.max_write = init.max_write;
    g_init.max_pages = (init.flags & FUSE_MAX_PAGES) ? init.max_pages : 0;
  }
  iovec patched[2] = {{iov[0].iov_base, sizeof out}, {body.data(), body.size()}};
  const ssize_t res = ::writev(fd, patched, body.empty() ? 1 : 2);
  g_init.answered = res >= 0 && out.error == 0;
  return res;
}

ssize_t write_reply(int fd, iovec* iov, int count, void*) {
  if (count >= 1 && iov[0].iov_len >= sizeof(fuse_out_header)) {
    fuse_out_header out;
    std::memcpy(&out, iov[0].iov_base, sizeof out);
    if (t_sink && out.unique != 0 && out.unique == t_sink->unique()) {
      RingReplySink* sink = t_sink;
      t_sink = nullptr;  // one reply per request
      const long res = sink->take_reply(iov, count);
      if (res < 0) errno = EIO;
      return res;
    }
    if (t_init_unique != 0 && out.unique == t_init_unique) {
      t_init_unique = 0;
      return write_init_reply(fd, iov, count);
    }
  }
  return ::writev(fd, iov, count);
}

}  // namespace

int install_session_io(fuse_session* se, int fd, const SessionIoOptions& options) {
  g_options = options;
  g_init = InitOutcome{};
  g_session = se;
  g_fd = fd;
  fuse_custom_io io{};
  io.read = read_request;
  io.writev = write_reply;
  return fuse_session_custom_io(se, &io, fd);
}

const InitOutcome& init_outcome() { return g_init; }

void set_thread_receive_capacity(std::size_t bytes) { t_receive_capacity = bytes; }

unsigned char* reply_room(std::size_t* bytes) {
  *bytes = 0;
  return t_sink ? t_sink->room(bytes) : nullptr;
}

bool rewrite_tmpfile_as_create(void* request, std::size_t bytes) {
  fuse_in_header in;
  if (!request || bytes < sizeof in) return false;
  std::memcpy(&in, request, sizeof in);
  if (in.opcode != tmpfile_abi::kFuseTmpfile && in.opcode != FUSE_CREATE) return false;
  auto* p = static_cast<unsigned char*>(request);
  std::uint32_t flags;
  if (in.opcode == FUSE_CREATE) {  // wherever its flags are there, however short the rest
    if (bytes < sizeof in + sizeof flags) return false;
    std::memcpy(&flags, p + sizeof in, sizeof flags);
    flags &= ~static_cast<std::uint32_t>(__O_TMPFILE);
    std::memcpy(p + sizeof in, &flags, sizeof flags);
    return false;
  }
  // fuse_create_in (flags first) and at least the name's terminating byte, within what came.
  const std::size_t need = sizeof in + sizeof(fuse_create_in) + 1;
  if (bytes < need || in.len < need) return false;
  std::memcpy(&flags, p + sizeof in, sizeof flags);
  flags |= static_cast<std::uint32_t>(__O_TMPFILE);
  std::memcpy(p + sizeof in, &flags, sizeof flags);
  in.opcode = FUSE_CREATE;
  std::memcpy(p, &in, sizeof in);
  return true;
}

namespace {

// The reply to a request answered here, the bytes fuse_reply_* would send: result < 0 is an
// error (-errno, no body), else body follows the header. Through the ring entry the request came
// on, else /dev/fuse.
void send_direct_reply(RingReplySink* sink, std::uint64_t unique, long result, const void* body, std::size_t body_len) {
  if (result < 0) body_len = 0;
  fuse_out_header out{};
  out.unique = unique;
  out.error = result < 0 ? static_cast<std::int32_t>(result) : 0;
  out.len = static_cast<std::uint32_t>(sizeof out + body_len);
  iovec iov[2] = {{&out, sizeof out}, {const_cast<void*>(body), body_len}};
  const int count = body_len ? 2 : 1;
  if (sink) {
    (void)sink->take_reply(iov, count);
  } else {
    (void)::writev(g_fd, iov, count);  // ENOENT: the request was interrupted; nothing to do
  }
}

// A READ answered without libfuse: fuse_read_in in, the data out. False: not one to answer here
// (too short to be a READ), and libfuse takes it.
bool answer_read_directly(const fuse_in_header& in, const fuse_buf& buf, RingReplySink* sink) {
  fuse_read_in arg;
  if (buf.size < sizeof in + sizeof arg || in.len < sizeof in + sizeof arg) return false;
  std::memcpy(&arg, static_cast<const unsigned char*>(buf.mem) + sizeof in, sizeof arg);
  std::size_t room_bytes = 0;
  unsigned char* room = sink ? sink->room(&room_bytes) : nullptr;
  const unsigned char* data = nullptr;
  const long n = g_options.direct_read(g_options.direct_ctx, arg.fh, arg.offset, arg.size, room, room_bytes, &data);
  send_direct_reply(sink, in.unique, n, data, n > 0 ? static_cast<std::size_t>(n) : 0);
  return true;
}

// A WRITE the same way (fuse_write_in and its data in, fuse_write_out out). False for one that
// asks for the setid bits to go, or whose data is not all there (libfuse takes those).
bool answer_write_directly(const fuse_in_header& in, const fuse_buf& buf, RingReplySink* sink) {
  fuse_write_in arg;
  if (buf.size < sizeof in + sizeof arg || in.len < sizeof in + sizeof arg) return false;
  const auto* p = static_cast<const unsigned char*>(buf.mem);
  std::memcpy(&arg, p + sizeof in, sizeof arg);
  if ((arg.write_flags & FUSE_WRITE_KILL_SUIDGID) || arg.size > buf.size - sizeof in - sizeof arg) return false;
  const long n = g_options.direct_write(g_options.direct_ctx, arg.fh, arg.offset, p + sizeof in + sizeof arg, arg.size,
                                        (arg.write_flags & FUSE_WRITE_CACHE) != 0);
  fuse_write_out wout{};
  wout.size = n > 0 ? static_cast<std::uint32_t>(n) : 0;
  send_direct_reply(sink, in.unique, n, &wout, sizeof wout);
  return true;
}

}  // namespace

void dispatch_request(fuse_session* se, const fuse_buf& buf, RingReplySink* sink) {
  // The one place where a request is looked at before libfuse parses it: INIT's offers are noted,
  // a WRITE's flags kept for its handler (write_kills_suidgid), and FUSE_TMPFILE, which libfuse
  // 3.14 has no entry for, becomes a marked CREATE.
  fuse_in_header in;
  if (buf.mem && buf.size >= sizeof in) {
    std::memcpy(&in, buf.mem, sizeof in);
    // Space this request allocates is charged to its caller (mount/daemon/caller_charge.h).
    if (opcode_allocates(in.opcode)) charge_thread_to(in.uid, in.gid);
    if (in.opcode == FUSE_READ && g_options.direct_read && answer_read_directly(in, buf, sink)) return;
    if (in.opcode == FUSE_WRITE && g_options.direct_write && answer_write_directly(in, buf, sink)) return;
    if (in.opcode == FUSE_WRITE) {
      t_write_flags = write_flags_of(buf.mem, buf.size);
    } else if (in.opcode == FUSE_INIT) {
      g_init.kernel_offered_uring = init_offers_uring(buf.mem, buf.size);
      g_init.kernel_offered_killpriv_v2 = init_offers_killpriv_v2(buf.mem, buf.size);
      t_init_unique = in.unique;
    } else if (g_options.tmpfile_as_create) {
      rewrite_tmpfile_as_create(buf.mem, buf.size);  // touches FUSE_TMPFILE and CREATE only
    }
  }
  t_sink = sink;
  fuse_session_process_buf(se, &buf);
  t_sink = nullptr;
  t_init_unique = 0;
  t_write_flags = 0;
}

bool write_kills_suidgid() { return (t_write_flags & FUSE_WRITE_KILL_SUIDGID) != 0; }

void attributes_changed(std::uint64_t ino) {
  // Offset -1: the attributes only, never the page cache (which needs no lock of the inode, so
  // this may run inside the request that changed them).
  if (g_session) (void)fuse_lowlevel_notify_inval_inode(g_session, ino, -1, 0);
}

}  // namespace gcfs::mount
