// EncryptedFs: file contents. All handles of an inode share one ContentFile, which does the
// chunk mapping, the read-modify-write of partial chunks and the per-chunk locking.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "fs/log.h"
#include "fs/safe_open.h"
#include "mount/daemon/encrypted_fs.h"
#include "mount/transport/session_io.h"
#include "mount/daemon/tsan_handover.h"
#include "mount/daemon/encrypted_fs_handles.h"
#include "mount/daemon/node_generation.h"
#include "mount/daemon/open_reply.h"
#include "mount/daemon/recycling_allocator.h"

namespace gcfs::mount {
namespace {

// The handle OPEN or CREATE gave the kernel, by the number it names it with.
EncryptedFs::FileHandle* handle_of(std::uint64_t fh) { return reinterpret_cast<EncryptedFs::FileHandle*>(fh); }
EncryptedFs::FileHandle* handle_of(fuse_file_info* fi) { return handle_of(fi->fh); }

// Reopens an inode's O_PATH descriptor for I/O (fs/safe_open.h). Only a regular file is ever
// opened: a FIFO would block the worker and a device node would run its driver's open (-EUCLEAN
// then, for the caller to report). The type is the one the descriptor was checked to have as it
// was opened (PathFd::known_type: just now, or when it was cached): the open alone then.
int reopen_content(const PathFd& pf, int flags) {
  struct stat known {};
  known.st_mode = pf.known_type();
  OpenResult r = reopen_regular(pf.get(), flags, known.st_mode ? &known : nullptr);
  return r ? r.fd.release() : -r.error;
}

// Partial chunks are read, modified and sealed again, so even a write-only user needs the
// ciphertext open for reading: try read-write first, read-only where that is all that is wanted.
// *rw says which it got.
int open_backing(const PathFd& pf, bool writable, bool* rw) {
  int fd = reopen_content(pf, O_RDWR);
  *rw = fd >= 0;
  if (fd >= 0 || writable || (fd != -EACCES && fd != -EROFS && fd != -EPERM)) return fd;
  return reopen_content(pf, O_RDONLY);
}

}  // namespace

int EncryptedFs::report_not_regular(Inode& in, int path_fd) {
  struct stat st {};
  ::fstat(path_fd, &st);
  log::error(label_of(in) + ": is a " + file_type_name(st.st_mode) +
             " where a regular content file belongs (damaged or replaced in CIPHERDIR); not opened");
  return -EIO;
}

void EncryptedFs::write_mtime(Inode& in, int fd, const timespec& mtime) {
  const timespec tv[2] = {{0, UTIME_OMIT}, mtime};
  if (::futimens(fd, tv) != 0)
    log::warning(label_of(in) + ": cannot set the modification time: " + std::strerror(errno));
}

void EncryptedFs::forget_written_mtime(Inode& in, const timespec& written) {
  // Unless a newer one came meanwhile (it is written in its turn). Until here it was what a stat
  // showed, so no stat saw the backing file's older one in between.
  std::lock_guard lk(in.mu);
  if (in.pending_mtime && in.pending_mtime->tv_sec == written.tv_sec && in.pending_mtime->tv_nsec == written.tv_nsec)
    in.pending_mtime.reset();
}

int EncryptedFs::acquire_content(Inode& in, bool writable, std::shared_ptr<ContentFile>* out, int fd_in) {
  {
    std::lock_guard lk(in.mu);
    if (in.content && (!writable || in.content_writable)) {
      if (fd_in >= 0) ::close(fd_in);
      ++in.open_count;
      *out = in.content;
      return 0;
    }
  }
  // A descriptor to reopen from, taken before in.mu (path_fd may use the content's descriptors).
  PathFd pf;
  if (fd_in < 0) {
    pf = path_fd(in);
    if (!pf.ok()) return pf.error();
  }
  std::lock_guard lk(in.mu);
  if (!in.content) {
    bool rw = true;  // create's descriptor is read-write
    int fd = fd_in >= 0 ? fd_in : open_backing(pf, writable, &rw);
    if (fd == -EUCLEAN) return report_not_regular(in, pf.get());
    if (fd < 0) return fd;
    in.content = std::allocate_shared<ContentFile>(RecyclingAllocator<ContentFile>(), fd, vault_.layout(), engine_, vault_.keys(), label_of_id(in.id), vault_.journal(),
                                               &vault_.backing_io());
    if (fd_in >= 0) in.content->assume_new_empty();  // create's file, made with O_EXCL just now
    in.content_fds.push_back(fd);
    in.content_writable = rw;
  } else {
    if (writable && !in.content_writable) {
      // create's descriptor is read-write already.
      int fd = fd_in >= 0 ? fd_in : reopen_content(pf, O_RDWR);
      if (fd == -EUCLEAN) return report_not_regular(in, pf.get());
      if (fd < 0) return fd;
      in.content->set_fd(fd);
      in.content_fds.push_back(fd);
      in.content_writable = true;
    } else if (fd_in >= 0) {
      ::close(fd_in);
    }
  }
  ++in.open_count;
  *out = in.content;
  return 0;
}

EncryptedFs::HeldContent EncryptedFs::hold_open_content(Inode& in) {
  std::lock_guard lk(in.mu);
  if (!in.content || in.open_count <= 0) return {};
  ++in.open_count;
  return {this, &in, in.content};
}

void EncryptedFs::release_content(Inode& in) {
  std::shared_ptr<ContentFile> last;
  std::vector<int> fds;
  std::optional<timespec> mtime;
  {
    std::lock_guard lk(in.mu);
    if (--in.open_count > 0) return;
    last = std::move(in.content);
    fds.swap(in.content_fds);
    in.content_writable = false;
    mtime = in.pending_mtime;
    in.open_attr.reset();
  }
  // The kept mtime stays what a stat shows until it is on the backing file (the kernel sends
  // RELEASE after close has returned, so a stat may come meanwhile).
  if (mtime && last) {
    write_mtime(in, last->fd(), *mtime);
    forget_written_mtime(in, *mtime);
  }
  last.reset();
  for (int fd : fds) ::close(fd);
}

void EncryptedFs::open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Inode& in = inode(ino);
  if (S_ISDIR(in.type)) return (void)fuse_reply_err(req, EISDIR);
  const bool writable = (fi->flags & O_ACCMODE) != O_RDONLY;
  std::shared_ptr<ContentFile> content;
  int rc = acquire_content(in, writable, &content);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  if ((fi->flags & O_TRUNC) && writable) {
    rc = content->truncate(0);
    if (rc < 0) {
      release_content(in);
      return (void)fuse_reply_err(req, -rc);
    }
    // The kernel leaves an O_TRUNC open to us whole (no SETATTR follows): the truncate's rule
    // for the setid bits is applied here.
    truncate_clears_setid(req, ino, content->fd());
  }
  auto* h = track(new FileHandle{&in, std::move(content), (fi->flags & O_APPEND) != 0 && !options_.writeback_cache});
  fi->fh = reinterpret_cast<std::uint64_t>(h);
  fi->keep_cache = 0;  // a fresh open rereads from us: the ciphertext is the truth
  fi->noflush = 1;     // no FLUSH at close (mount/daemon/encrypted_fs_ops.cc says why)
  choose_direct_io(fi, direct_writes_);
  if (reply_open(req, fi) != 0) {  // direct I/O: parallel direct writes (mount/daemon/open_reply.h)
    untrack(h);
    delete h;
    release_content(in);
  }
}

void EncryptedFs::create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  if (fi->flags & __O_TMPFILE) return create_tmpfile(req, parent, mode, fi);  // FUSE_TMPFILE
  Inode& dir = inode(parent);
  PathFd at = path_fd(dir);
  if (!at.ok()) return (void)fuse_reply_err(req, -at.error());
  const int dirfd = at.get();
  DiskName dn;
  int rc = disk_name(dir, name, &dn);
  if (rc == 0) rc = NameMapping::write_name_file(dirfd, dn);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  // Only a file made here and now is handed out: O_EXCL. The kernel sends CREATE after its lookup
  // found no such name, so an existing entry appeared since then, from outside this mount (a
  // second mount of the vault, a sync tool, someone working in CIPHERDIR). Opening it here would
  // use the daemon's rights, and the kernel, told the file is new, would check none of its own
  // (under --allow-other that was a read-write handle on root's 0600 file for any user). ESTALE
  // makes the kernel look the name up again and open what it finds as any open, with its own
  // permission checks; the caller's own O_EXCL gets the EEXIST it asked for.
  NewEntryAcls acls;
  mode = new_entry_mode(req, dir, mode, false, &acls);
  int fd = ::openat(dirfd, dn.entry.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST && !(fi->flags & O_EXCL)) err = ESTALE;
    else if (err != EEXIST) NameMapping::remove_name_file(dirfd, dn);
    return (void)fuse_reply_err(req, err);
  }
  // Owner and attributes are those of the file we hold, never of whatever the name leads to now.
  give_to_caller(req, dirfd, dn.entry, fd);
  store_new_entry_acls("/proc/self/fd/" + std::to_string(fd), acls);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return (void)fuse_reply_err(req, err);
  }
  fuse_entry_param e{};
  rc = make_entry(dir, dirfd, dn.entry, &e, &st);
  if (rc < 0) {
    ::close(fd);
    return (void)fuse_reply_err(req, -rc);
  }
  finish_create(req, inode(e.ino), fd, st, e, fi);
}

void EncryptedFs::finish_create(fuse_req_t req, Inode& in, int fd, const struct stat& st, const fuse_entry_param& e,
                                fuse_file_info* fi) {
  std::shared_ptr<ContentFile> content;
  const int rc = acquire_content(in, true, &content, fd);
  if (rc < 0) {
    inodes_.forget(in, 1);
    return (void)fuse_reply_err(req, -rc);
  }
  {
    std::lock_guard lk(in.mu);  // what the file was made with (Inode::open_attr)
    if (!in.open_attr) in.open_attr = std::make_unique<struct stat>(st);
    in.file_caps = Inode::kCapsNone;  // made just now: no security.capability yet
  }
  auto* h = track(new FileHandle{&in, std::move(content), (fi->flags & O_APPEND) != 0 && !options_.writeback_cache});
  fi->fh = reinterpret_cast<std::uint64_t>(h);
  fi->keep_cache = 0;
  fi->noflush = 1;
  // Direct I/O as open() gives (O_DIRECT, or write-only: mount/daemon/open_reply.h), so that an
  // O_DIRECT handle does not hold the inode in cached mode (which makes the kernel serialize every
  // other handle's direct writes).
  choose_direct_io(fi, direct_writes_);
  fuse_entry_param with = e;
  with.generation = node_generation();  // mount/daemon/node_generation.h
  if (fuse_reply_create(req, &with, fi) != 0) {
    untrack(h);
    delete h;
    release_content(in);
  }
}

void EncryptedFs::create_tmpfile(fuse_req_t req, fuse_ino_t parent, mode_t mode, fuse_file_info* fi) {
  fi->flags &= ~__O_TMPFILE;  // the marker (and O_DIRECTORY, part of O_TMPFILE) mean nothing further on
  fi->flags &= ~O_DIRECTORY;
  Inode& dir = inode(parent);
  if (!S_ISDIR(dir.type)) return (void)fuse_reply_err(req, ENOTDIR);
  PathFd at = path_fd(dir);
  if (!at.ok()) return (void)fuse_reply_err(req, -at.error());
  const int dirfd = at.get();
  // The file has no name, so it needs no name file and cannot meet an existing entry. Not
  // O_EXCL: a LINK may give it a name later (the kernel sent this request only after it had
  // checked the caller's own O_EXCL, which forbids that link, itself).
  NewEntryAcls acls;
  mode = new_entry_mode(req, dir, mode, false, &acls);
  int fd = ::openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, mode & 07777);
  if (fd < 0) {
    const int err = errno;
    // A backing filesystem without O_TMPFILE: the kernel passes this on to the caller (overlayfs
    // then goes without). Never ENOSYS, which would end FUSE_TMPFILE for the whole mount.
    return (void)fuse_reply_err(req, err == ENOSYS || err == EISDIR ? EOPNOTSUPP : err);
  }
  give_to_caller(req, dirfd, "", fd);
  store_new_entry_acls("/proc/self/fd/" + std::to_string(fd), acls);
  struct stat st {};
  // The inode's own way to the file while it has no name: an O_PATH descriptor, as an inode
  // whose last name was removed keeps (Inode::orphan_fd).
  const int path = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_PATH | O_CLOEXEC);
  if (path < 0 || ::fstat(fd, &st) != 0) {
    const int err = errno;
    if (path >= 0) ::close(path);
    ::close(fd);
    return (void)fuse_reply_err(req, err);
  }
  const std::string handle = export_ ? backing_handle(fd, "") : "";
  Inode& in = inodes_.insert_new_unnamed(st, path, handle);
  fuse_entry_param e{};
  plain_attr(in, &st, fd, "");  // an empty file: nothing to translate, but the kept mtime rule
  e.ino = inodes_.id_of(in);
  e.attr = st;  // st_nlink 0, as ext4 shows it: the kernel keeps what this says
  e.attr_timeout = options_.attr_timeout;
  e.entry_timeout = 0;  // the kernel's dentry of an unnamed file is never looked up
  finish_create(req, in, fd, st, e, fi);
}

void EncryptedFs::read(fuse_req_t req, fuse_ino_t, std::size_t size, off_t off, fuse_file_info* fi) {
  // Replies straight from the buffer the chunks were opened into: no copy on our side. Every READ
  // but a malformed one is answered by direct_read instead (FuseFilesystem::direct_read), which is
  // also handed the ring entry's payload to open the chunks into over io_uring.
  const unsigned char* data = nullptr;
  const long n = direct_read(this, fi->fh, static_cast<std::uint64_t>(off), size, nullptr, 0, &data);
  if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
  fuse_reply_buf(req, reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
}

long EncryptedFs::direct_read(void*, std::uint64_t fh, std::uint64_t off, std::size_t size, unsigned char* room,
                              std::size_t room_bytes, const unsigned char** data) {
  FileHandle* h = handle_of(fh);
  handover_acquire(h);
  const long n = h->content->read_view(off, size, data, room, room_bytes);
  handover_release(h);
  return n;
}

void EncryptedFs::write(fuse_req_t req, fuse_ino_t ino, const char* buf, std::size_t size, off_t off, fuse_file_info* fi) {
  FileHandle* h = handle_of(fi);
  const auto* in = reinterpret_cast<const std::uint8_t*>(buf);
  // The kernel asks for the setid bits to go (the writer lacks CAP_FSETID): on every direct write,
  // and on buffered ones since INIT settled FUSE_HANDLE_KILLPRIV_V2 (mount/transport/session_io.h), which
  // ends the GETXATTR of security.capability the kernel sent before every write. Done first, as a
  // local filesystem does; writeback of mapped pages never asks.
  if (!fi->writepage && write_kills_suidgid(fi)) write_clears_setid(req, *h->inode, ino, h->content->fd());
  const long n = direct_write(this, fi->fh, static_cast<std::uint64_t>(off), in, size, fi->writepage != 0);
  if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
  fuse_reply_write(req, static_cast<std::size_t>(n));
}

long EncryptedFs::direct_write(void* ctx, std::uint64_t fh, std::uint64_t off, const unsigned char* data, std::size_t size,
                               bool writepage) {
  auto* self = static_cast<EncryptedFs*>(ctx);
  FileHandle* h = handle_of(fh);
  // Page-cache writeback (mapped pages) may arrive through any writable handle of the inode, an
  // O_APPEND one included: those bytes belong at their page's offset, never at the end.
  // An append finds the end and writes there under one lock in ContentFile, so that no other
  // write growing the file in between is overwritten.
  handover_acquire(h);
  self->drop_file_caps_for_write(*h->inode, h->content->fd());
  const long n = h->append && !writepage ? h->content->append(data, size) : h->content->write(off, data, size);
  handover_release(h);
  return n;
}

void EncryptedFs::release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  FileHandle* h = handle_of(fi);
  Inode& in = *h->inode;
  untrack(h);
  delete h;
  release_content(in);
  fuse_reply_err(req, 0);
}

void EncryptedFs::fsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info* fi) {
  ContentFile& c = *handle_of(fi)->content;
  const int fd = c.fd();
  // A kept mtime is part of what the caller makes durable.
  Inode& in = *handle_of(fi)->inode;
  std::optional<timespec> mtime;
  {
    std::lock_guard lk(in.mu);
    mtime = in.pending_mtime;
  }
  if (mtime) {
    write_mtime(in, fd, *mtime);
    forget_written_mtime(in, *mtime);
  }
  int r = datasync ? ::fdatasync(fd) : ::fsync(fd);
  const int err = r == 0 ? 0 : errno;
  // From here on the caller relies on these bytes: later rewrites of them are journaled first.
  if (r == 0) c.mark_durable();
  fuse_reply_err(req, err);
}

void EncryptedFs::fallocate(fuse_req_t req, fuse_ino_t, int mode, off_t offset, off_t length, fuse_file_info* fi) {
  ContentFile& c = *handle_of(fi)->content;
  if (offset < 0 || length <= 0) return (void)fuse_reply_err(req, EINVAL);
  const std::uint64_t off = static_cast<std::uint64_t>(offset), len = static_cast<std::uint64_t>(length);
  const bool keep_size = mode & FALLOC_FL_KEEP_SIZE;
  int rc;
  switch (mode & ~FALLOC_FL_KEEP_SIZE) {
    case 0:
      // The promise of fallocate: later writes into the range find their space. The chunks'
      // backing space is reserved (or ENOSPC now), the range reads as zeros, the size grows only
      // (issue 18: never cut off what a concurrent WRITE added).
      rc = c.allocate(off, len, keep_size);
      break;
    case FALLOC_FL_PUNCH_HOLE:
      rc = keep_size ? c.punch_hole(off, len) : -EOPNOTSUPP;
      break;
    case FALLOC_FL_ZERO_RANGE:
      // Zeros now (whole chunks become holes), space reserved as for mode 0.
      rc = c.punch_hole(off, len);
      if (rc == 0) rc = c.allocate(off, len, keep_size);
      break;
    default:
      rc = -EOPNOTSUPP;
  }
  fuse_reply_err(req, -rc);
}

}  // namespace gcfs::mount
