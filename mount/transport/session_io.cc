// The daemon's own I/O under libfuse (session_io.h): the dispatch of every request, INIT's
// reply, the READs and WRITEs answered without libfuse, and each reply's way back to its channel.
#include "mount/transport/session_io.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
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

// The unique of the INIT request from its dispatch until its reply, which libfuse builds on the
// thread that dispatches it. INIT comes once, before any other request: the session's state, not
// a request's.
std::atomic<std::uint64_t> g_init_unique{0};

// While libfuse holds a request whose channel does not reply to /dev/fuse, the request's unique
// names the channel: this bit, and the channel's address. The kernel's uniques count up from 0,
// one request at a time, and never reach the bit; a user-space address never has it.
constexpr std::uint64_t kChannelUnique = std::uint64_t{1} << 63;

std::uint64_t unique_naming(RequestChannel* channel) {
  return kChannelUnique | static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(channel));
}

RequestChannel* channel_named_by(std::uint64_t unique) {
  if (!(unique & kChannelUnique)) return nullptr;
  return reinterpret_cast<RequestChannel*>(static_cast<std::uintptr_t>(unique & ~kChannelUnique));
}

void set_unique(void* request, std::uint64_t unique) {
  std::memcpy(static_cast<unsigned char*>(request) + offsetof(fuse_in_header, unique), &unique, sizeof unique);
}

// libfuse insists on a read function; it is never called, since both transports read their
// requests themselves (each into its own buffer, as large as the requests it may get).
ssize_t read_request(int fd, void* buf, std::size_t len, void*) { return ::read(fd, buf, len); }

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
    if (RequestChannel* channel = channel_named_by(out.unique)) {
      // A reply to a request of that channel: it goes there, with the request's own unique.
      out.unique = channel->dispatched_unique;
      std::memcpy(iov[0].iov_base, &out, sizeof out);
      const long res = channel->send_reply(iov, count);
      if (res < 0) errno = EIO;
      return res;
    }
    if (out.unique != 0 && out.unique == g_init_unique.load(std::memory_order_relaxed)) {
      g_init_unique.store(0, std::memory_order_relaxed);
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
  g_init_unique.store(0, std::memory_order_relaxed);
  fuse_custom_io io{};
  io.read = read_request;
  io.writev = write_reply;
  return fuse_session_custom_io(se, &io, fd);
}

const InitOutcome& init_outcome() { return g_init; }

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

void mark_write_kills_suidgid(void* request, std::size_t bytes) {
  fuse_in_header in;
  constexpr std::size_t kFlagsEnd = offsetof(fuse_write_in, flags) + sizeof(std::uint32_t);
  if (!request || bytes < sizeof in + kFlagsEnd) return;
  std::memcpy(&in, request, sizeof in);
  if (in.opcode != FUSE_WRITE || in.len < sizeof in + kFlagsEnd) return;
  auto* flags_at = static_cast<unsigned char*>(request) + sizeof in + offsetof(fuse_write_in, flags);
  std::uint32_t flags;
  std::memcpy(&flags, flags_at, sizeof flags);
  flags &= ~kWriteKillsSuidgidMark;
  if (write_flags_of(request, bytes) & FUSE_WRITE_KILL_SUIDGID) flags |= kWriteKillsSuidgidMark;
  std::memcpy(flags_at, &flags, sizeof flags);
}

bool write_kills_suidgid(const fuse_file_info* fi) { return fi && (fi->flags & kWriteKillsSuidgidMark) != 0; }

namespace {

// The reply to a request answered here, the bytes fuse_reply_* would send: result < 0 is an
// error (-errno, no body), else body follows the header. Through the channel the request came on.
void send_direct_reply(RequestChannel& channel, std::uint64_t unique, long result, const void* body,
                       std::size_t body_len) {
  if (result < 0) body_len = 0;
  fuse_out_header out{};
  out.unique = unique;
  out.error = result < 0 ? static_cast<std::int32_t>(result) : 0;
  out.len = static_cast<std::uint32_t>(sizeof out + body_len);
  iovec iov[2] = {{&out, sizeof out}, {const_cast<void*>(body), body_len}};
  // /dev/fuse's ENOENT: the request was interrupted; nothing to do.
  (void)channel.send_reply(iov, body_len ? 2 : 1);
}

// A READ answered without libfuse: fuse_read_in in, the data out. False: not one to answer here
// (too short to be a READ), and libfuse takes it.
bool answer_read_directly(const fuse_in_header& in, const fuse_buf& buf, RequestChannel& channel) {
  fuse_read_in arg;
  if (buf.size < sizeof in + sizeof arg || in.len < sizeof in + sizeof arg) return false;
  std::memcpy(&arg, static_cast<const unsigned char*>(buf.mem) + sizeof in, sizeof arg);
  std::size_t room_bytes = 0;
  unsigned char* room = channel.reply_room(&room_bytes);
  const unsigned char* data = nullptr;
  const long n = g_options.direct_read(g_options.direct_ctx, arg.fh, arg.offset, arg.size, room, room_bytes, &data);
  send_direct_reply(channel, in.unique, n, data, n > 0 ? static_cast<std::size_t>(n) : 0);
  return true;
}

// A WRITE the same way (fuse_write_in and its data in, fuse_write_out out). False for one that
// asks for the setid bits to go, or whose data is not all there (libfuse takes those).
bool answer_write_directly(const fuse_in_header& in, const fuse_buf& buf, RequestChannel& channel) {
  fuse_write_in arg;
  if (buf.size < sizeof in + sizeof arg || in.len < sizeof in + sizeof arg) return false;
  const auto* p = static_cast<const unsigned char*>(buf.mem);
  std::memcpy(&arg, p + sizeof in, sizeof arg);
  if ((arg.write_flags & FUSE_WRITE_KILL_SUIDGID) || arg.size > buf.size - sizeof in - sizeof arg) return false;
  const long n = g_options.direct_write(g_options.direct_ctx, arg.fh, arg.offset, p + sizeof in + sizeof arg, arg.size,
                                        (arg.write_flags & FUSE_WRITE_CACHE) != 0);
  fuse_write_out wout{};
  wout.size = n > 0 ? static_cast<std::uint32_t>(n) : 0;
  send_direct_reply(channel, in.unique, n, &wout, sizeof wout);
  return true;
}

// Hands the request to libfuse. Where the channel does not reply to /dev/fuse, the request names
// the channel in place of its unique while libfuse holds it (write_reply sends the reply there),
// and has its own back once libfuse is done.
void process_on(fuse_session* se, const fuse_buf& buf, RequestChannel& channel, std::uint64_t unique) {
  if (channel.replies_to_dev_fuse()) {
    fuse_session_process_buf(se, &buf);
    return;
  }
  channel.dispatched_unique = unique;
  set_unique(buf.mem, unique_naming(&channel));
  fuse_session_process_buf(se, &buf);
  set_unique(buf.mem, unique);
}

}  // namespace

void dispatch_request(fuse_session* se, const fuse_buf& buf, RequestChannel& channel) {
  // The one place where a request is looked at before libfuse parses it: INIT's offers are noted,
  // a WRITE marked for its handler where the setid bits are to go (write_kills_suidgid), and
  // FUSE_TMPFILE, which libfuse 3.14 has no entry for, becomes a marked CREATE.
  fuse_in_header in;
  if (!buf.mem || buf.size < sizeof in) {  // libfuse says what is wrong with it
    fuse_session_process_buf(se, &buf);
    return;
  }
  std::memcpy(&in, buf.mem, sizeof in);
  // Space this request allocates is charged to its caller (mount/daemon/caller_charge.h).
  if (opcode_allocates(in.opcode)) channel.charge().charge_to(in.uid, in.gid);
  if (in.opcode == FUSE_READ && g_options.direct_read && answer_read_directly(in, buf, channel)) return;
  if (in.opcode == FUSE_WRITE && g_options.direct_write && answer_write_directly(in, buf, channel)) return;
  if (in.opcode == FUSE_WRITE) {
    mark_write_kills_suidgid(buf.mem, buf.size);
  } else if (in.opcode == FUSE_INIT) {
    g_init.kernel_offered_uring = init_offers_uring(buf.mem, buf.size);
    g_init.kernel_offered_killpriv_v2 = init_offers_killpriv_v2(buf.mem, buf.size);
    g_init_unique.store(in.unique, std::memory_order_relaxed);
  } else if (g_options.tmpfile_as_create) {
    rewrite_tmpfile_as_create(buf.mem, buf.size);  // touches FUSE_TMPFILE and CREATE only
  }
  process_on(se, buf, channel, in.unique);
  if (in.opcode == FUSE_INIT) g_init_unique.store(0, std::memory_order_relaxed);
}

void attributes_changed(std::uint64_t ino) {
  // Offset -1: the attributes only, never the page cache (which needs no lock of the inode, so
  // this may run inside the request that changed them).
  if (g_session) (void)fuse_lowlevel_notify_inval_inode(g_session, ino, -1, 0);
}

}  // namespace gcfs::mount
