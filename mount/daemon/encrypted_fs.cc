// EncryptedFs: shared helpers, lookups, attributes and the calls that change them.
#include "mount/daemon/encrypted_fs.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>

#include "fs/dir_iv.h"
#include "fs/log.h"
#include "fs/unique_fd.h"
#include "mount/daemon/caller_creds.h"
#include "mount/daemon/encrypted_fs_handles.h"
#include "mount/daemon/fd_limit.h"
#include "mount/daemon/node_generation.h"
#include "mount/daemon/open_reply.h"
#include "mount/transport/session_io.h"
#include "mount/daemon/tsan_handover.h"

namespace gcfs::mount {

namespace {

// The soft limit, which the runner has raised as far as it could before we are made.
rlim_t soft_fd_limit() {
  rlimit lim{};
  return ::getrlimit(RLIMIT_NOFILE, &lim) == 0 ? lim.rlim_cur : 1024;
}

// What the caches may take: the soft limit less what is open already (the engine's own
// descriptors among them: a CUDA context holds a few dozen), so that open files and the calls
// under way always keep their share.
DescriptorBudget cache_budget() {
  const rlim_t soft = soft_fd_limit();
  const std::size_t used = descriptors_in_use();
  const rlim_t available = soft == RLIM_INFINITY ? soft : soft > used ? soft - used : 0;
  const DescriptorBudget budget = descriptor_budget(available);
  // The caches never go below their floors; if that is more than half of what is free, open
  // files will meet EMFILE soon: say so now, with the numbers, rather than fail calls later.
  if (available != RLIM_INFINITY && available < 2 * (budget.dirs + budget.files))
    log::warning("only " + std::to_string(available) + " descriptors free after start (limit " + std::to_string(soft) +
              ", " + std::to_string(used) + " held by the engine and the daemon): open files may fail with "
              "EMFILE; raise the limit (ulimit -n) to at least " +
              std::to_string(used + 4 * (budget.dirs + budget.files)));
  return budget;
}

}  // namespace

EncryptedFs::EncryptedFs(const Vault& vault, ChunkEngine& engine, int root_fd, FsOptions options)
    : vault_(vault),
      engine_(engine),
      inodes_(root_fd, cache_budget()),
      options_(options),
      running_as_root_(::geteuid() == 0) {}

EncryptedFs::~EncryptedFs() {
  if (handle_mount_fd_ >= 0) ::close(handle_mount_fd_);
  // No request runs any more (the workers are gone): what the kernel never released goes now.
  for (FileHandle* h : open_files_) {
    Inode& in = *h->inode;
    delete h;
    release_content(in);
  }
  for (DirHandle* h : open_dirs_) delete h;
}

EncryptedFs::FileHandle* EncryptedFs::track(FileHandle* h) {
  std::lock_guard lk(handles_mu_);
  open_files_.insert(h);
  handover_release(h);  // to the READs and WRITEs answered outside libfuse (mount/daemon/tsan_handover.h)
  return h;
}

EncryptedFs::DirHandle* EncryptedFs::track(DirHandle* h) {
  std::lock_guard lk(handles_mu_);
  open_dirs_.insert(h);
  return h;
}

void EncryptedFs::untrack(FileHandle* h) {
  handover_acquire(h);  // from the last READ or WRITE on it, before it goes
  std::lock_guard lk(handles_mu_);
  open_files_.erase(h);
}

void EncryptedFs::untrack(DirHandle* h) {
  std::lock_guard lk(handles_mu_);
  open_dirs_.erase(h);
}

void EncryptedFs::init(fuse_conn_info* conn) {
  constexpr unsigned kMaxRequest = 1u << 20;
  conn->max_write = kMaxRequest;  // libfuse sizes max_pages from this
  conn->max_readahead = kMaxRequest;
  // Readahead READs are background requests, of which the kernel keeps 12 in flight by default:
  // fewer than 8 streams of 1 MiB readahead want. 64 (congestion at three quarters of it, as the
  // kernel's default): 8 streams reading on the 16-core H200 machine 1.1x to 1.2x faster on either
  // transport (gpu engine, three interleaved rounds).
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  if (options_.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) conn->want |= FUSE_CAP_WRITEBACK_CACHE;
  else conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  direct_writes_ = !(conn->want & FUSE_CAP_WRITEBACK_CACHE) && conn->proto_minor >= kCoherentDirectWritesMinor;
  // Every listing is a READDIRPLUS, whose entries carry the attributes (readdir). libfuse asks for
  // READDIRPLUS_AUTO by default, with which the kernel sends READDIRPLUS only for a directory's
  // first reply (or after a lookup in it) and plain READDIR for the rest: in a directory larger
  // than one reply (a few hundred names), `ls -l` or `find -ls` then cost one LOOKUP per file
  // (measured: 0.8 per file with 1000 files a directory, and 8x the time of `find -ls`).
  if (conn->capable & FUSE_CAP_READDIRPLUS) {
    conn->want |= FUSE_CAP_READDIRPLUS;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  }
  // POSIX ACLs: the kernel enforces them and leaves umask and default-ACL inheritance to us
  // (DONT_MASK); without both capabilities ACLs are refused and the kernel applies the umask.
  constexpr unsigned kAcl = FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
  acls_ = (conn->capable & kAcl) == kAcl;
  if (acls_) conn->want |= kAcl;
  // File handles that survive the kernel forgetting a node: finding a file again by its backing
  // handle (open_by_handle_at) takes CAP_DAC_READ_SEARCH, and CIPHERDIR's filesystem must give
  // handles.
  // open_by_handle_at wants a descriptor on the backing filesystem that is not O_PATH.
  if (handle_mount_fd_ < 0) handle_mount_fd_ = ::openat(inodes_.root().root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  export_ = (conn->capable & FUSE_CAP_EXPORT_SUPPORT) && running_as_root_ && handle_mount_fd_ >= 0 &&
            !backing_handle(inodes_.root().root_fd, "").empty();
  if (export_) conn->want |= FUSE_CAP_EXPORT_SUPPORT;
  log::info(std::string("serving ") + vault_.cipherdir() + " with the " + engine_.name() + " engine" +
            (options_.writeback_cache && (conn->want & FUSE_CAP_WRITEBACK_CACHE) ? ", writeback cache on" : "") +
            (direct_writes_ ? ", write-only opens with direct I/O" : ""));
  log::info("descriptors: one per open file, a cache of at most " + std::to_string(inodes_.dir_cache_limit()) +
            " for directories and a cache of at most " + std::to_string(inodes_.fd_cache_limit()) +
            " for other files (limit " + std::to_string(soft_fd_limit()) +
            "); what the kernel remembers beyond that is opened again by name when needed");
}

int EncryptedFs::dir_iv(Inode& dir, DirIv* iv) {
  {
    std::lock_guard lk(dir.mu);
    if (dir.dir_iv) {
      *iv = *dir.dir_iv;
      return 0;
    }
  }
  PathFd at = path_fd(dir);
  if (!at.ok()) return at.error();
  std::lock_guard lk(dir.mu);
  if (!dir.dir_iv) {
    DirIv v{};
    int rc = vault_.dir_ivs().read(at.get(), &v, label_of_id(dir.id));  // the path only for a message
    if (rc < 0) return rc;
    dir.dir_iv = v;
  }
  *iv = *dir.dir_iv;
  return 0;
}

int EncryptedFs::disk_name(Inode& dir, const char* name, DiskName* out) {
  const std::size_t len = std::strlen(name);
  if (len > kMaxNameBytes) return -ENAMETOOLONG;
  if (len == 0) return -ENOENT;
  DirIv iv{};
  int rc = dir_iv(dir, &iv);
  if (rc < 0) return rc;
  *out = vault_.names().to_disk(name, iv);
  if (options_.bad_names.empty()) return 0;
  // A name with no entry of its own may be how a listing showed a sync client's conflict copy:
  // then it stands for that entry, which is renamed and unlinked as it is (its .name file, for a
  // long name, belongs to the original and stays).
  PathFd at = path_fd(dir);
  if (!at.ok()) return 0;
  struct stat st {};
  if (::fstatat(at.get(), out->entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) return 0;
  if (auto e = find_bad_name_entry(vault_.names(), at.get(), name, iv, options_.bad_names)) {
    out->entry = *e;
    out->encoded = std::move(*e);
    out->is_long = false;
  }
  return 0;
}

int EncryptedFs::plain_attr(Inode& inode, struct stat* st, int fd, const char* name) {
  if (S_ISREG(st->st_mode)) {
    std::shared_ptr<ContentFile> content;
    {
      std::lock_guard lk(inode.mu);
      content = inode.content;
      if (content) {
        if (!inode.open_attr) inode.open_attr = std::make_unique<struct stat>();
        *inode.open_attr = *st;
      }
      if (inode.pending_mtime) st->st_mtim = *inode.pending_mtime;
    }
    if (content) {
      std::int64_t s = content->plain_size();
      st->st_size = s < 0 ? 0 : s;
      return s < 0 ? static_cast<int>(s) : 0;
    }
    // As the file will read once opened (an incomplete last chunk is left out: ContentFile).
    auto plain = vault_.layout().readable_plain_size(static_cast<std::uint64_t>(st->st_size));
    if (!plain) {
      log::error(label_of(inode) + ": ciphertext size " + std::to_string(st->st_size) +
                 " is impossible for this vault's chunk size (truncated or damaged file)");
      st->st_size = 0;
      return -EIO;
    }
    st->st_size = static_cast<off_t>(*plain);
  } else if (S_ISLNK(st->st_mode)) {
    auto link = NameMapping::read_link(fd, name);
    if (!link) return 0;
    if (!is_long_target_file(*link)) {
      auto target = vault_.names().decrypt_symlink(*link);
      if (target) st->st_size = static_cast<off_t>(target->size());
      return 0;
    }
    std::lock_guard lk(inode.mu);
    if (*name) {  // a lookup: fd is the directory, where the target's file lives
      std::string why;
      auto target = vault_.names().read_symlink(fd, *link, &why);
      auto stored = target ? NameMapping::read_long_link(fd, *link) : std::nullopt;
      if (!target || !stored) {
        inode.long_link.reset();
        log::error(label_of(inode) + ": " + (why.empty() ? std::string("long symlink target changed while read") : why));
        st->st_size = 0;
        return -EIO;
      }
      inode.long_link = std::make_unique<Inode::LongLink>(Inode::LongLink{std::move(*stored), std::move(*target)});
    }
    if (inode.long_link && inode.long_link->link.link == *link) st->st_size = static_cast<off_t>(inode.long_link->target.size());
  }
  return 0;
}

int EncryptedFs::openat_or_warn(int dirfd, const char* name, int flags) {
  int fd = ::openat(dirfd, name, flags);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE) && inodes_.drop_cached_fds() > 0) fd = ::openat(dirfd, name, flags);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
    const int err = errno;
    warn_out_of_descriptors();
    errno = err;
  }
  return fd;
}

int EncryptedFs::make_entry(Inode& dir, int dirfd, const std::string& entry, fuse_entry_param* e,
                            const struct stat* known) {
  std::memset(e, 0, sizeof *e);
  struct stat st {};
  if (known && !S_ISDIR(known->st_mode)) st = *known;
  else if (::fstatat(dirfd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  // A file the table knows (a directory with its descriptor cached) needs nothing more: no
  // descriptor opened and closed again, no backing handle (it has its node ID already).
  Inode* known_inode = inodes_.find_known(dir, entry, st);
  if (!known_inode) {
    // A directory's descriptor goes into the cache (it is likely to be used next); other files are
    // found again by name when needed.
    int fd = -1;
    if (S_ISDIR(st.st_mode)) {
      fd = openat_or_warn(dirfd, entry.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return -errno;
      // The stat of what we hold (the entry may have been replaced since the fstatat).
      if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return -err;
      }
    }
    std::string handle;
    if (export_) handle = backing_handle(fd >= 0 ? fd : dirfd, fd >= 0 ? "" : entry.c_str());
    known_inode = &inodes_.find_or_insert(dir, entry, st, fd, export_ ? &handle : nullptr);
  }
  Inode& inode = *known_inode;
  // A damaged file still gets an entry, so it can be renamed or removed; with no caching of its
  // attributes every stat, and every read (the kernel refreshes the size first), gets the EIO.
  const bool damaged = plain_attr(inode, &st, dirfd, entry.c_str()) == -EIO;
  e->ino = inodes_.id_of(inode);
  e->attr = st;
  e->attr_timeout = damaged ? 0 : options_.attr_timeout;
  e->entry_timeout = damaged ? 0 : options_.entry_timeout;
  return 0;
}

void EncryptedFs::reply_entry_or_err(fuse_req_t req, int rc, const fuse_entry_param& e) {
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  fuse_entry_param with = e;
  with.generation = node_generation();  // handles of earlier mounts go stale, never wrong
  fuse_reply_entry(req, &with);
}

void EncryptedFs::give_to_caller(fuse_req_t req, int dirfd, const std::string& entry, int fd) {
  if (!running_as_root_) return;
  const fuse_ctx* ctx = fuse_req_ctx(req);
  // A root caller keeps what the backing filesystem gave us, root's own as it gave it to the
  // caller (a setgid directory's group included): no chown, and no stat of the directory, which
  // each create in it has made stale (a round trip where CIPHERDIR is on a network share).
  if (ctx->uid == 0 && ctx->gid == 0) return;
  gid_t gid = ctx->gid;
  struct stat dir {};
  if (::fstat(dirfd, &dir) == 0 && (dir.st_mode & S_ISGID)) gid = dir.st_gid;  // setgid directories pass on their group
  if (ctx->uid == 0 && gid == 0) return;
  struct stat made {};
  const bool known = fd >= 0 && ::fstat(fd, &made) == 0;
  int r;
  if (fd >= 0) {
    r = ::fchown(fd, ctx->uid, gid);
  } else {
    // By name (FIFOs, sockets, devices, symlinks, whiteouts: nothing we can hold open first):
    // the entry is pinned with an O_PATH descriptor and given away only if it is what was just
    // made, a node of that kind with one name. A hard link to a file kept elsewhere, swapped in
    // under the name by someone who can write CIPHERDIR, has two and stays as it is.
    UniqueFd pinned(::openat(dirfd, entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!pinned || ::fstat(pinned.get(), &st) != 0) {
      r = -1;
    } else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || st.st_nlink != 1) {
      log::warning("a new entry was replaced before it could be given to uid " + std::to_string(ctx->uid) +
                   " (someone else writes CIPHERDIR?); left as it is");
      return;
    } else {
      r = ::fchownat(pinned.get(), "", ctx->uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
    }
  }
  if (r != 0) {
    log::warning("cannot give a new entry to uid " + std::to_string(ctx->uid) + ": " + std::strerror(errno));
    return;
  }
  // Our chown as root clears the setuid and setgid bits the kernel let the caller ask for
  // (open(O_CREAT, 02755) in a directory of its own group): they go back, through the descriptor
  // (a device node or FIFO made by name keeps what chown left: the bits mean nothing there).
  if (known && (made.st_mode & (S_ISUID | S_ISGID))) {
    if (::fchmod(fd, made.st_mode & 07777) != 0) log::warning(std::string("cannot keep the setid bits of a new entry: ") + std::strerror(errno));
  }
}

namespace {

// The setid rule of one change applied to the open backing file fd; the caller's credentials are
// read only when the file has a setid bit. True when the mode changed.
// seen (optional): the fstat taken, where it succeeded and the mode stayed as it was.
bool apply_setid_rule(fuse_req_t req, int fd, const SetattrRequest& change, const char* what, KernelSays kernel,
                      std::optional<struct stat>* seen = nullptr) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  if (!(st.st_mode & (S_ISUID | S_ISGID))) {
    if (seen) *seen = st;
    return false;
  }
  const mode_t mode = mode_after_setattr(st.st_mode, st.st_gid, change, caller_creds(req, kernel));
  if (mode == (st.st_mode & 07777)) return false;
  if (::fchmod(fd, mode) != 0) {
    log::warning(std::string("cannot clear the setid bits of a ") + what + " file: " + std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace

// Neither an OPEN's nor a WRITE's reply carries attributes, and after either the kernel keeps the
// mode it knows (it forgets only size and times; with FUSE_HANDLE_KILLPRIV_V2 it no longer reads
// them back before clearing the bits itself): told, the next stat asks for the mode again.
void EncryptedFs::truncate_clears_setid(fuse_req_t req, fuse_ino_t ino, int fd) {
  SetattrRequest truncate;
  truncate.size = true;
  if (apply_setid_rule(req, fd, truncate, "truncated", KernelSays::Nothing)) attributes_changed(ino);
}

void EncryptedFs::write_clears_setid(fuse_req_t req, Inode& in, fuse_ino_t ino, int fd) {
  // The kernel asks this for every write of a caller without CAP_FSETID, whatever the mode: a
  // file seen without setid bits since it was opened (Inode::open_attr, which every attribute
  // reply and SETATTR of the open file refreshes) has none to clear, and costs no fstat.
  {
    std::lock_guard lk(in.mu);
    if (in.content && in.open_attr && !(in.open_attr->st_mode & (S_ISUID | S_ISGID))) return;
  }
  SetattrRequest write;
  write.remove_privileges = true;  // what the kernel's own "remove privileges" SETATTR asks
  std::optional<struct stat> seen;
  // Called only for a WRITE that carries FUSE_WRITE_KILL_SUIDGID.
  const bool changed = apply_setid_rule(req, fd, write, "written", KernelSays::KillSetid, &seen);
  {
    std::lock_guard lk(in.mu);
    if (changed) in.open_attr.reset();  // its mode is the old one; the next fstat is kept
    else if (seen && in.content && !in.open_attr) in.open_attr = std::make_unique<struct stat>(*seen);
  }
  if (changed) attributes_changed(ino);
}

FileLabel EncryptedFs::label_of_id(std::uint64_t id) {
  // By node ID, not by Inode: a message may come after the kernel forgot the inode.
  return FileLabel::made_by([this, id] {
    if (auto live = inodes_.find_id(id)) return label_of(*live);
    return vault_.cipherdir() + "/... (node " + std::to_string(id) + ", forgotten)";
  });
}

std::string EncryptedFs::backing_handle(int dirfd, const char* entry) {
  struct {
    file_handle fh;
    unsigned char bytes[MAX_HANDLE_SZ];
  } h{};
  h.fh.handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  if (::name_to_handle_at(dirfd, entry, &h.fh, &mount_id, *entry ? 0 : AT_EMPTY_PATH) != 0) return "";
  return std::string(reinterpret_cast<const char*>(&h.fh), sizeof(file_handle) + h.fh.handle_bytes);
}

namespace {

// Whether the directory dirfd lies beneath CIPHERDIR (root: its attributes), by walking ".." up
// to it. Off CIPHERDIR's filesystem, at that filesystem's root (whose ".." is itself) or deeper
// than any path can be, it does not.
bool beneath_cipherdir(int dirfd, const struct stat& root) {
  UniqueFd cur(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  for (int depth = 0; cur && depth < 4096; ++depth) {
    struct stat st {};
    if (::fstat(cur.get(), &st) != 0 || st.st_dev != root.st_dev) return false;
    if (st.st_ino == root.st_ino) return true;
    UniqueFd up(::openat(cur.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
    struct stat ust {};
    if (!up || ::fstat(up.get(), &ust) != 0 || (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)) return false;
    cur = std::move(up);
  }
  return false;
}

}  // namespace

int EncryptedFs::lookup_unnamed(fuse_ino_t ino, bool parent, fuse_entry_param* e) {
  // A descriptor of ino: the live inode's, or its backing file found again through its handle
  // (only handles we took ourselves, of files in CIPHERDIR, are ever opened).
  int fd = -1;
  if (auto live = inodes_.find_id(ino)) {
    PathFd pf = path_fd(*live);
    if (!pf.ok()) return pf.error();
    fd = ::fcntl(pf.get(), F_DUPFD_CLOEXEC, 0);
  } else if (auto handle = inodes_.handle_of_id(ino)) {
    fd = ::open_by_handle_at(handle_mount_fd_, reinterpret_cast<file_handle*>(handle->data()),
                             O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno == ESTALE || errno == ENOENT ? -ESTALE : -errno;
  } else {
    return -ESTALE;
  }
  if (fd < 0) return -errno;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return -ESTALE;
  }
  struct stat root {};
  ::fstat(inodes_.root().root_fd, &root);
  const bool is_root = st.st_dev == root.st_dev && st.st_ino == root.st_ino;
  if (parent && !is_root) {  // the root's ".." is the root: never a step out of CIPHERDIR
    if (!S_ISDIR(st.st_mode)) {
      ::close(fd);
      return -ENOTDIR;
    }
    const int up = ::openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    if (up < 0 || ::fstat(up, &st) != 0) {
      if (up >= 0) ::close(up);
      return -ESTALE;
    }
    fd = up;
  }
  // Reached without a name, a directory must still be one of CIPHERDIR's: one its owner moved out
  // of it stays reachable through a handle the kernel holds, and ".." of it leads on above the
  // vault (over an NFS export, anywhere on the backing filesystem). Files, which have no "..",
  // must at least be on CIPHERDIR's filesystem.
  if (S_ISDIR(st.st_mode) ? !beneath_cipherdir(fd, root) : st.st_dev != root.st_dev) {
    ::close(fd);
    log::warning(std::string("a ") + (S_ISDIR(st.st_mode) ? "directory" : "file") +
                 " reached by its file handle is no longer in CIPHERDIR (moved out of it?): refused (ESTALE)");
    return -ESTALE;
  }
  Inode& node = inodes_.find_or_insert_unnamed(st, fd, backing_handle(fd, ""));
  if (!parent && inodes_.id_of(node) != ino) {  // another file under that number now
    inodes_.forget(node, 1);
    return -ESTALE;
  }
  std::memset(e, 0, sizeof *e);
  PathFd pf = path_fd(node);
  if (!pf.ok() || plain_attr(node, &st, pf.get(), "") < 0) {
    inodes_.forget(node, 1);
    return pf.ok() ? -EIO : pf.error();
  }
  e->ino = inodes_.id_of(node);
  e->attr = st;
  e->attr_timeout = options_.attr_timeout;
  e->entry_timeout = options_.entry_timeout;
  return 0;
}

void EncryptedFs::lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (export_ && name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) {
    // Only the kernel's export code asks for "." and ".." (handles of nodes it has forgotten).
    fuse_entry_param e{};
    return reply_entry_or_err(req, lookup_unnamed(parent, name[1] == '.', &e), e);
  }
  Inode& dir = inode(parent);
  DiskName dn;
  int rc = disk_name(dir, name, &dn);
  fuse_entry_param e{};
  if (rc == 0) {
    PathFd at = path_fd(dir);
    rc = at.ok() ? make_entry(dir, at.get(), dn.entry, &e) : at.error();
  }
  reply_entry_or_err(req, rc, e);
}

void EncryptedFs::forget(fuse_req_t req, fuse_ino_t ino, std::uint64_t nlookup) {
  inodes_.forget(inode(ino), nlookup);
  fuse_reply_none(req);
}

void EncryptedFs::forget_multi(fuse_req_t req, std::size_t count, fuse_forget_data* forgets) {
  for (std::size_t i = 0; i < count; ++i) inodes_.forget(inode(forgets[i].ino), forgets[i].nlookup);
  fuse_reply_none(req);
}

void EncryptedFs::getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  struct stat st {};
  if (const int rc = attr_of(inode(ino), fi, &st); rc < 0) return (void)fuse_reply_err(req, -rc);
  fuse_reply_attr(req, &st, options_.attr_timeout);
}

int EncryptedFs::attr_of(Inode& in, fuse_file_info* fi, struct stat* st) {
  // A file open now: its content descriptor will do, with or without the caller's handle (the
  // kernel asks without one before a chown, and after each write).
  const HeldContent held = !fi && S_ISREG(in.type) ? hold_open_content(in) : HeldContent();
  if (held || (fi && S_ISREG(in.type))) {
    const int fd = held ? held->fd() : reinterpret_cast<FileHandle*>(fi->fh)->content->fd();
    if (::fstat(fd, st) != 0) return -errno;
    return plain_attr(in, st, -1, "");
  }
  PathFd pf = path_fd(in);
  if (!pf.ok()) return pf.error();
  if (::fstatat(pf.get(), "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  return plain_attr(in, st, pf.get(), "");
}

void EncryptedFs::setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid, fuse_file_info* fi) {
  struct stat st {};
  Inode& in = inode(ino);
  int rc = change_attr(req, in, attr, valid, &st);
  // change_attr's answer for what it leaves to GETATTR: the attributes as they are.
  if (rc == kAnswerAsGetattr) rc = attr_of(in, fi, &st);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  fuse_reply_attr(req, &st, options_.attr_timeout);
}

int EncryptedFs::change_attr(fuse_req_t req, Inode& in, struct stat* attr, int valid, struct stat* out) {
  // The mtime alone (with the ctime, which no call can set) of an open regular file: what the
  // kernel's writeback cache sends after each written file, most often just before the caller sets
  // the times itself. Kept until the last close (Inode::pending_mtime): one backing call less per
  // file, a round trip where CIPHERDIR is on a network share.
  if (S_ISREG(in.type) && (valid & ~FUSE_SET_ATTR_CTIME) == FUSE_SET_ATTR_MTIME) {
    std::unique_lock lk(in.mu);
    if (in.content && in.open_count > 0) {
      in.pending_mtime = attr->st_mtim;
      if (!in.open_attr) return kAnswerAsGetattr;
      *out = *in.open_attr;
      out->st_mtim = attr->st_mtim;
      std::shared_ptr<ContentFile> content = in.content;
      lk.unlock();
      const std::int64_t size = content->plain_size();
      if (size < 0) return static_cast<int>(size);
      out->st_size = size;
      return 0;
    }
  }
  // Times alone for a regular file whose last name is gone and that nobody holds open: what the
  // writeback cache sends after every unlink of a file (it stamps the ctime and writes the inode's
  // times back at once). Nothing can see those times any more: no backing call (a round trip per
  // removed file where CIPHERDIR is on a network share).
  constexpr int kTimes = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW |
                         FUSE_SET_ATTR_CTIME;
  if (S_ISREG(in.type) && (valid & ~kTimes) == 0 && inodes_.nameless(in)) {
    std::lock_guard lk(in.mu);
    if (!in.content) return kAnswerAsGetattr;
  }
  // A file open now is reached through its content descriptor, which every call below takes as
  // well as an O_PATH one (chmod through its /proc link, the *at calls with AT_EMPTY_PATH): no
  // descriptor opened by name for the chown, chmod and utimes that follow writing a file (tar).
  const HeldContent held = S_ISREG(in.type) ? hold_open_content(in) : HeldContent();
  PathFd pf;
  if (!held) {
    pf = path_fd(in);
    if (!pf.ok()) return pf.error();
  }
  const int fd = held ? held->fd() : pf.get();
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const bool is_link = S_ISLNK(in.type);
  if ((valid & FUSE_SET_ATTR_MODE) && is_link) return -EOPNOTSUPP;
  // The setuid and setgid bits this request leaves (setid_rules.h); the caller's credentials are
  // read only when some bit is at stake.
  SetattrRequest change;
  change.mode = valid & FUSE_SET_ATTR_MODE;
  change.new_mode = attr->st_mode;
  // chown(file, -1, -1) reaches us with nothing asked (the ctime alone, which libfuse 3.14 does
  // not pass on): with FUSE_HANDLE_KILLPRIV_V2 the kernel leaves the setid bits to us and sends no
  // owner it does not change, and on ext4 such a chown clears them as any chown does, for root
  // too (pjdfstest chown/00). The only other empty SETATTR, the kernel's "remove privileges" of a
  // fallocate by a caller without CAP_FSETID, clears the same bits by the same rule.
  const bool chown_to_nothing =
      !S_ISDIR(in.type) && !S_ISLNK(in.type) && (valid & ~FUSE_SET_ATTR_CTIME) == 0;
  change.owner = (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) || chown_to_nothing;
  if (valid & FUSE_SET_ATTR_GID) change.new_gid = attr->st_gid;
  change.size = valid & FUSE_SET_ATTR_SIZE;
  change.remove_privileges = valid == 0 || (valid & (FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID));
  // The attributes before the change matter only to these (the setid bits, a chown that changes
  // nothing); times alone, which the kernel's writeback cache sends after every written file, need
  // no stat before (one round trip less where CIPHERDIR is on a network share).
  struct stat before {};
  const bool have_before = change.mode || change.owner || change.size || change.remove_privileges;
  if (have_before)
    if (::fstatat(fd, "", &before, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  bool changed = false;  // a backing call below changed the file: its attributes are read again
  const mode_t at_stake = (before.st_mode | (change.mode ? change.new_mode : 0)) & (S_ISUID | S_ISGID);
  std::optional<mode_t> new_mode;
  if (change.mode) new_mode = change.new_mode & 07777;
  if (at_stake && !is_link && (change.mode || change.owner || change.size || change.remove_privileges))
    new_mode = mode_after_setattr(before.st_mode, before.st_gid, change,
                                  caller_creds(req, (valid & (FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID))
                                                        ? KernelSays::KillSetid
                                                        : KernelSays::Nothing));
  // A chown to the owner and group the file has changes nothing but the ctime (tar run by root
  // gives every file its owner so): no backing call. The setid bits it would clear are dealt with
  // below all the same.
  if (change.owner && (((valid & FUSE_SET_ATTR_UID) && attr->st_uid != before.st_uid) ||
                       ((valid & FUSE_SET_ATTR_GID) && attr->st_gid != before.st_gid))) {
    uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : static_cast<uid_t>(-1);
    gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : static_cast<gid_t>(-1);
    if (::fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return -errno;
    changed = true;
  }
  if (valid & FUSE_SET_ATTR_SIZE) {
    if (!S_ISREG(in.type)) return S_ISDIR(in.type) ? -EISDIR : -EINVAL;
    std::shared_ptr<ContentFile> content;
    int rc = acquire_content(in, true, &content);
    if (rc == 0) {
      rc = content->truncate(static_cast<std::uint64_t>(attr->st_size));
      release_content(in);
    }
    if (rc < 0) return rc;
    changed = true;
  }
  // After the chown: the backing filesystem's own chown clears bits that may have to stay.
  if (new_mode && (change.mode || *new_mode != (before.st_mode & 07777) || change.owner)) {
    if (::chmod(proc.c_str(), *new_mode) != 0) return -errno;
    changed = true;
  }
  if (change.mode && (S_ISREG(in.type) || S_ISDIR(in.type)))
    if (int rc = chmod_acl(proc, *new_mode, in); rc < 0) return rc;
  if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
    timespec tv[2];
    tv[0].tv_sec = 0;
    tv[1].tv_sec = 0;
    tv[0].tv_nsec = UTIME_OMIT;
    tv[1].tv_nsec = UTIME_OMIT;
    if (valid & FUSE_SET_ATTR_ATIME_NOW) tv[0].tv_nsec = UTIME_NOW;
    else if (valid & FUSE_SET_ATTR_ATIME) tv[0] = attr->st_atim;
    if (valid & FUSE_SET_ATTR_MTIME_NOW) tv[1].tv_nsec = UTIME_NOW;
    else if (valid & FUSE_SET_ATTR_MTIME) tv[1] = attr->st_mtim;
    {
      // A kept mtime is replaced by this one, or written with the atime.
      std::lock_guard lk(in.mu);
      if (in.pending_mtime && tv[1].tv_nsec == UTIME_OMIT) tv[1] = *in.pending_mtime;
      in.pending_mtime.reset();
    }
    // AT_EMPTY_PATH works on O_PATH descriptors of symlinks too, where /proc paths would follow.
    int r = ::utimensat(fd, "", tv, AT_EMPTY_PATH);
    if (r != 0 && errno == EINVAL && !is_link) r = ::utimensat(AT_FDCWD, proc.c_str(), tv, 0);
    if (r != 0) return -errno;
    changed = true;
  }
  // The attributes now, through the descriptor at hand (as getattr would, with a second one); where
  // nothing was changed (a chown to the owner the file has), those read before are still them.
  *out = before;
  if ((changed || !have_before) && ::fstatat(fd, "", out, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  return plain_attr(in, out, fd, "");
}

void EncryptedFs::readlink(fuse_req_t req, fuse_ino_t ino) {
  Inode& in = inode(ino);
  PathFd pf = path_fd(in);
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  auto link = NameMapping::read_link(pf.get(), "");
  if (!link) return (void)fuse_reply_err(req, errno);
  if (is_long_target_file(*link)) {
    // Read and checked beside the link at its lookup (plain_attr).
    std::string target;
    {
      std::lock_guard lk(in.mu);
      if (in.long_link && in.long_link->link.link == *link) target = in.long_link->target;
    }
    if (target.empty()) {
      log::error(label_of(in) + ": long symlink target is missing, damaged or does not decrypt");
      return (void)fuse_reply_err(req, EIO);
    }
    return (void)fuse_reply_readlink(req, target.c_str());
  }
  auto target = vault_.names().decrypt_symlink(*link);
  if (!target) {
    log::error(label_of(in) + ": symlink target does not decrypt (tampered or not written by gpucryptfs)");
    return (void)fuse_reply_err(req, EIO);
  }
  fuse_reply_readlink(req, target->c_str());
}

void EncryptedFs::statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv {};
  if (::fstatvfs(inodes_.root().root_fd, &sv) != 0) return (void)fuse_reply_err(req, errno);
  sv.f_namemax = kMaxNameBytes;  // long names make every plaintext name up to 255 bytes work
  fuse_reply_statfs(req, &sv);
}

void EncryptedFs::access(fuse_req_t req, fuse_ino_t ino, int mask) {
  PathFd pf = path_fd(inode(ino));
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  int r = ::faccessat(AT_FDCWD, pf.proc_path().c_str(), mask, AT_EACCESS);
  fuse_reply_err(req, r == 0 ? 0 : errno);
}

}  // namespace gcfs::mount
