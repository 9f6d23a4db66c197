// Volume mode's filesystem: one file, volume.img, over one ContentFile (volume_daemon.h).
#include "mount/daemon/volume_daemon.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "crypto/key_ring.h"
#include "crypto/secret.h"
#include "fs/content/content_file.h"
#include "fs/log.h"
#include "fs/vault.h"
#include "fs/volume_container.h"
#include "mount/fuse_api.h"
#include "mount/transport/request_loop.h"
#include "mount/transport/session_io.h"
#include "mount/transport/transport.h"

namespace gcfs::mount {
namespace {

constexpr fuse_ino_t kImageIno = 2;
// The volume's shape never changes while it is mounted (resize needs it unmounted), so the
// kernel may cache names and attributes for as long as it likes.
constexpr double kCacheSeconds = 3600.0;
// Large requests are what the gpu engine batches best; 1 MiB is libfuse's largest.
// The daemon's largest request (mount/transport/request_loop.h), as an unsigned for fuse_conn_info.
constexpr unsigned kMaxVolumeRequest = static_cast<unsigned>(kMaxRequestBytes);

// Everything a mounted volume needs, in construction order: ContentFile refers to the others.
struct VolumeState {
  VolumeState(VolumeContainer c, const SecretBytes& master, const EngineOptions& eo, bool ro)
      : container(std::move(c)),
        layout(container.layout()),
        engines(eo),
        keys(master),
        content(container.fd(), layout, engines.engine(), keys, container.path()),
        size(container.config().volume_size),
        read_only(ro) {}

  VolumeContainer container;
  ChunkLayout layout;
  EngineSet engines;
  KeyRing keys;
  ContentFile content;
  const std::uint64_t size;
  const bool read_only;
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();

  // How much the daemon overlapped requests: logged at unmount, so an experiment can tell
  // whether the kernel and the loop driver gave the engine concurrent work to batch.
  std::atomic<std::uint64_t> reads{0}, writes{0};
  std::atomic<int> in_flight{0}, max_in_flight{0};
};

// Counts one read or write request for as long as it is being served.
class InFlight {
 public:
  InFlight(VolumeState& s, std::atomic<std::uint64_t>& kind) : s_(s) {
    kind.fetch_add(1, std::memory_order_relaxed);
    const int now = s_.in_flight.fetch_add(1, std::memory_order_relaxed) + 1;
    int seen = s_.max_in_flight.load(std::memory_order_relaxed);
    while (now > seen && !s_.max_in_flight.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  ~InFlight() { s_.in_flight.fetch_sub(1, std::memory_order_relaxed); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  VolumeState& s_;
};

VolumeState& state(fuse_req_t req) { return *static_cast<VolumeState*>(fuse_req_userdata(req)); }

struct stat attr_of(const VolumeState& s, fuse_ino_t ino) {
  struct stat st {};
  st.st_ino = ino;
  st.st_uid = s.uid;
  st.st_gid = s.gid;
  if (ino == FUSE_ROOT_ID) {
    st.st_mode = S_IFDIR | 0755;
    st.st_nlink = 2;
    return st;
  }
  struct stat backing {};
  if (::fstat(s.container.fd(), &backing) == 0) {
    st.st_atim = backing.st_atim;
    st.st_mtim = backing.st_mtim;
    st.st_ctim = backing.st_ctim;
    st.st_blocks = backing.st_blocks;  // du shows the space the sparse container really takes
  }
  st.st_mode = S_IFREG | (s.read_only ? 0400 : 0600);
  st.st_nlink = 1;
  st.st_size = static_cast<off_t>(s.size);
  st.st_blksize = 4096;
  return st;
}

void vol_init(void*, fuse_conn_info* conn) {
  conn->max_write = kMaxVolumeRequest;
  conn->max_readahead = std::max(conn->max_readahead, kMaxVolumeRequest);
  // Direct I/O from the loop driver or an application is sent to us as parallel requests.
  if (conn->capable & FUSE_CAP_ASYNC_DIO) conn->want |= FUSE_CAP_ASYNC_DIO;
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
}

void vol_destroy(void* userdata) {
  auto* s = static_cast<VolumeState*>(userdata);
  log::info(s->container.path() + ": served " + std::to_string(s->reads.load()) + " reads and " +
            std::to_string(s->writes.load()) + " writes, at most " + std::to_string(s->max_in_flight.load()) +
            " requests at once");
  if (!s->read_only && ::fdatasync(s->container.fd()) != 0)
    log::error(s->container.path() + ": final sync failed: " + std::strerror(errno));
}

void vol_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent != FUSE_ROOT_ID || std::strcmp(name, kVolumeImageName) != 0) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_entry_param e{};
  e.ino = kImageIno;
  e.attr = attr_of(state(req), kImageIno);
  e.attr_timeout = kCacheSeconds;
  e.entry_timeout = kCacheSeconds;
  fuse_reply_entry(req, &e);
}

void vol_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID && ino != kImageIno) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  struct stat st = attr_of(state(req), ino);
  // st_blocks changes as chunks are written and punched: keep it short-lived.
  fuse_reply_attr(req, &st, ino == kImageIno ? 1.0 : kCacheSeconds);
}

void vol_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  VolumeState& s = state(req);
  if ((to_set & FUSE_SET_ATTR_SIZE) && ino == kImageIno && static_cast<std::uint64_t>(attr->st_size) != s.size) {
    log::warning("refused to change volume.img's size: use 'gpucryptfs volume resize' on the unmounted container");
    fuse_reply_err(req, EPERM);
    return;
  }
  // Modes, owners and times of the image are fixed; accepting the request keeps tools like cp
  // and touch working.
  struct stat st = attr_of(s, ino);
  fuse_reply_attr(req, &st, 1.0);
}

void vol_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  std::vector<char> buf(size);
  std::size_t used = 0;
  struct Entry {
    const char* name;
    fuse_ino_t ino;
    mode_t mode;
  };
  const Entry entries[] = {{".", FUSE_ROOT_ID, S_IFDIR}, {"..", FUSE_ROOT_ID, S_IFDIR}, {kVolumeImageName, kImageIno, S_IFREG}};
  for (off_t i = off; i < 3; ++i) {
    struct stat st {};
    st.st_ino = entries[i].ino;
    st.st_mode = entries[i].mode;
    std::size_t n = fuse_add_direntry(req, buf.data() + used, size - used, entries[i].name, &st, i + 1);
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void vol_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino != kImageIno) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  if (state(req).read_only && (fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EROFS);
    return;
  }
  // Only this daemon changes the container while it is mounted, so cached pages stay valid.
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

// A READ of the volume, for FuseFilesystem::direct_read (ctx: the VolumeState), which answers
// every READ but a malformed one without libfuse; over io_uring `room` is the ring entry's
// payload, and the chunks are opened right where the reply goes.
long vol_direct_read(void* ctx, std::uint64_t, std::uint64_t off, std::size_t size, unsigned char* room,
                     std::size_t room_bytes, const unsigned char** data) {
  VolumeState& s = *static_cast<VolumeState*>(ctx);
  *data = nullptr;
  if (off >= s.size || size == 0) return 0;
  const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(size, s.size - off));
  InFlight counted(s, s.reads);
  // Replies from the buffer the chunks were opened into.
  return s.content.read_view(off, len, data, room, room_bytes);
}

void vol_read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  const unsigned char* data = nullptr;
  const long n = vol_direct_read(&state(req), 0, static_cast<std::uint64_t>(off), size, nullptr, 0, &data);
  if (n < 0) {
    fuse_reply_err(req, static_cast<int>(-n));
    return;
  }
  fuse_reply_buf(req, reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
}

// Whether a write of size bytes at o runs past the volume's end. Buffered writes get a short
// write up to the end; an O_DIRECT one is refused whole, because the kernel turns a short reply
// to an asynchronous direct write into EIO, which reads as a broken disk rather than a full one.
bool refuse_at_end(const VolumeState& s, std::uint64_t o, std::size_t size, const fuse_file_info* fi) {
  if (o >= s.size) return size != 0;
  return (fi->flags & O_DIRECT) && size > s.size - o;
}

void vol_write(fuse_req_t req, fuse_ino_t, const char* data, size_t size, off_t off, fuse_file_info* fi) {
  VolumeState& s = state(req);
  if (s.read_only) {
    fuse_reply_err(req, EROFS);
    return;
  }
  const std::uint64_t o = static_cast<std::uint64_t>(off);
  // A volume is a fixed-size device: writing at its end fails like writing past a disk's end.
  if (refuse_at_end(s, o, size, fi)) {
    fuse_reply_err(req, ENOSPC);
    return;
  }
  if (o >= s.size) {  // a zero-byte write at the end
    fuse_reply_write(req, 0);
    return;
  }
  const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(size, s.size - o));
  InFlight counted(s, s.writes);
  ssize_t n = s.content.write(o, reinterpret_cast<const std::uint8_t*>(data), len);
  if (n < 0) {
    fuse_reply_err(req, static_cast<int>(-n));
    return;
  }
  fuse_reply_write(req, static_cast<std::size_t>(n));
}

// Discard: PUNCH_HOLE and ZERO_RANGE both end as holes, whole chunks taking no space again.
// Preallocation inside the volume is a no-op: every byte of it already exists.
void vol_fallocate(fuse_req_t req, fuse_ino_t, int mode, off_t off, off_t length, fuse_file_info*) {
  VolumeState& s = state(req);
  if (s.read_only) {
    fuse_reply_err(req, EROFS);
    return;
  }
  const std::uint64_t o = static_cast<std::uint64_t>(off), len = static_cast<std::uint64_t>(length);
  const int zeroing = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
  if (mode & ~(zeroing | FALLOC_FL_KEEP_SIZE)) {
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  if (mode & zeroing) {
    fuse_reply_err(req, o >= s.size ? 0 : -s.content.punch_hole(o, std::min(len, s.size - o)));
    return;
  }
  fuse_reply_err(req, (o + len > s.size && !(mode & FALLOC_FL_KEEP_SIZE)) ? ENOSPC : 0);
}

void vol_flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void vol_fsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info*) {
  VolumeState& s = state(req);
  int fd = s.container.fd();
  int rc = datasync ? ::fdatasync(fd) : ::fsync(fd);
  fuse_reply_err(req, rc == 0 ? 0 : errno);
}

void vol_statfs(fuse_req_t req, fuse_ino_t) {
  VolumeState& s = state(req);
  struct statvfs sv {};
  if (::fstatvfs(s.container.fd(), &sv) != 0) {
    fuse_reply_err(req, errno);
    return;
  }
  sv.f_namemax = 255;
  fuse_reply_statfs(req, &sv);
}

const fuse_lowlevel_ops kVolumeOps = [] {
  fuse_lowlevel_ops ops{};
  ops.init = vol_init;
  ops.destroy = vol_destroy;
  ops.lookup = vol_lookup;
  ops.getattr = vol_getattr;
  ops.setattr = vol_setattr;
  ops.readdir = vol_readdir;
  ops.open = vol_open;
  ops.read = vol_read;
  ops.write = vol_write;
  ops.fallocate = vol_fallocate;
  ops.flush = vol_flush;
  ops.fsync = vol_fsync;
  ops.statfs = vol_statfs;
  return ops;
}();

}  // namespace

FuseFilesystem make_volume_filesystem(VolumeMountSetup& setup) {
  VolumeContainer container(setup.container, !setup.read_only);
  // Authenticate, then act: the header is only believed (and the stream only cut back to its
  // size) once a copy of it has opened with the password.
  SecretBytes master = container.unlock(setup.password.view(), setup.kdf_policy, setup.password_kind);  // throws WrongPassword
  log::info(setup.container + ": " + unlocked_by_text(container.opened_slot(), setup.password_kind));
  setup.password.clear();
  container.check_stream_size();
  container.check_content_header();  // damaged, it would turn every read into EIO
  auto s = std::make_shared<VolumeState>(std::move(container), master, setup.engine, setup.read_only);
  s->container.check_key_opens_data(s->keys, s->engines.engine());
  const std::int64_t stream = s->content.plain_size();
  if (stream < 0 || static_cast<std::uint64_t>(stream) < s->size)
    throw CorruptData("the content stream of " + setup.container + " does not match its volume size");
  log::info(setup.container + ": volume of " + std::to_string(s->size) + " bytes, chunk size " +
            std::to_string(s->layout.chunk_size()) + ", " + s->engines.description());
  FuseFilesystem fs;
  fs.ops = &kVolumeOps;
  fs.direct_read = vol_direct_read;
  fs.userdata = s.get();
  fs.keep_alive = s;
  VolumeState* state = s.get();  // kept alive by keep_alive until after the workers are gone
  fs.allocate_buffer = [state](std::size_t n) { return state->engines.engine().allocate_io_buffer(n); };
  fs.on_worker_start = [state] { ContentFile::prepare_thread(state->layout, max_request_bytes()); };
  return fs;
}

}  // namespace gcfs::mount
