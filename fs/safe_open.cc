#include "fs/safe_open.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace gcfs {
namespace {

// Set once the kernel has answered ENOSYS: it predates openat2 (Linux 5.6), and every lookup then
// walks the path one component at a time.
std::atomic<bool> g_no_openat2{false};

// An O_PATH descriptor of the directory relpath (a plain relative path) beneath dirfd, never
// following a symbolic link; -errno on failure (-ELOOP for a link, -ENOTDIR for another type).
int open_dir_path(int dirfd, std::string_view relpath) {
  const std::string path(relpath);
#ifdef SYS_openat2
  if (!g_no_openat2.load(std::memory_order_relaxed)) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != ENOSYS) return -errno;
    g_no_openat2.store(true, std::memory_order_relaxed);
  }
#endif
  // Component by component: O_NOFOLLOW on each, so no link anywhere is followed.
  UniqueFd cur;
  int at = dirfd;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    const std::string comp = path.substr(start, slash - start);
    int fd = ::openat(at, comp.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    UniqueFd next(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return -errno;
    if (S_ISLNK(st.st_mode)) return -ELOOP;
    if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
    cur = std::move(next);
    at = cur.get();
    start = slash + 1;
  }
  return cur.release();
}

bool type_matches(mode_t mode, FileType type) {
  return type == FileType::Directory ? S_ISDIR(mode) : S_ISREG(mode);
}

// Opens the object behind the O_PATH descriptor `path_fd` (already checked to be a regular file
// or directory) for real I/O. /proc/self/fd reopens exactly that inode; without /proc, the name is
// opened again and must lead to the same inode.
int reopen(int path_fd, int parent, const std::string& leaf, int flags, const struct stat& want) {
  const std::string proc = "/proc/self/fd/" + std::to_string(path_fd);
  // Through /proc the very inode path_fd holds is opened, already known to be of the right type:
  // nothing to check, and no O_NONBLOCK to guard the open (it is never a FIFO).
  int fd = ::open(proc.c_str(), flags | O_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno != ENOENT) return -errno;
  fd = ::openat(parent, leaf.c_str(), flags | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return -errno;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_dev != want.st_dev || st.st_ino != want.st_ino) {
    ::close(fd);
    return -EAGAIN;  // replaced between the check and the open
  }
  // O_NONBLOCK only guarded the open; regular files ignore it, but callers expect plain I/O.
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0 && (fl & O_NONBLOCK)) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

}  // namespace

const char* file_type_name(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "regular file";
    case S_IFDIR: return "directory";
    case S_IFLNK: return "symbolic link";
    case S_IFIFO: return "FIFO";
    case S_IFSOCK: return "socket";
    case S_IFCHR: return "character device";
    case S_IFBLK: return "block device";
    default: return "file of unknown type";
  }
}

std::string OpenResult::why() const {
  switch (error) {
    case 0: return "no error";
    case EUCLEAN: return std::string("is a ") + file_type_name(found_type) + ", not what the vault keeps there";
    case ELOOP: return "is or passes through a symbolic link (never followed in CIPHERDIR)";
    case EXDEV: return "would lead outside CIPHERDIR";
    default: return std::strerror(error);
  }
}

OpenResult reopen_regular(int fd, int flags, const struct stat* known) {
  OpenResult r;
  struct stat st {};
  if (known) {
    st = *known;
  } else if (::fstat(fd, &st) != 0) {
    r.error = errno;
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    r.error = EUCLEAN;
    r.found_type = st.st_mode & S_IFMT;
    return r;
  }
  const int d = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), flags | O_CLOEXEC | O_NOCTTY);
  if (d < 0) r.error = errno;
  else r.fd.reset(d);
  return r;
}

OpenResult open_regular(const std::string& path, int flags) {
  OpenResult r;
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    r.error = errno;
    return r;
  }
  r.fd.reset(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    r.error = errno;
    r.fd.reset();
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    r.error = EUCLEAN;
    r.found_type = st.st_mode & S_IFMT;
    r.fd.reset();
    return r;
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0 && (fl & O_NONBLOCK)) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return r;
}

bool is_plain_relative_path(std::string_view p) {
  if (p.empty() || p.front() == '/') return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t slash = p.find('/', start);
    if (slash == std::string_view::npos) slash = p.size();
    std::string_view comp = p.substr(start, slash - start);
    if (comp.empty() || comp == "." || comp == "..") return false;
    start = slash + 1;
  }
  return true;
}

OpenResult open_beneath(int dirfd, std::string_view relpath, FileType type, int flags, mode_t mode) {
  OpenResult r;
  if (!is_plain_relative_path(relpath)) {
    r.error = EXDEV;
    return r;
  }
  // The parent: dirfd itself, or a directory beneath it reached without following links.
  UniqueFd parent_holder;
  int parent = dirfd;
  std::string leaf(relpath);
  if (std::size_t slash = relpath.rfind('/'); slash != std::string_view::npos) {
    int p = open_dir_path(dirfd, relpath.substr(0, slash));
    if (p < 0) {
      r.error = -p == ENOTDIR ? EUCLEAN : -p;
      if (r.error == ELOOP) r.found_type = S_IFLNK;
      if (r.error == EUCLEAN) r.found_type = S_IFREG;  // some non-directory on the way
      return r;
    }
    parent_holder.reset(p);
    parent = p;
    leaf = std::string(relpath.substr(slash + 1));
  }

  const bool create = (flags & O_CREAT) != 0;
  const int io_flags = flags & ~(O_CREAT | O_EXCL | O_PATH | O_DIRECTORY | O_NOFOLLOW);
  for (int attempt = 0; attempt < 4; ++attempt) {
    // An exclusive create needs no look first: O_CREAT | O_EXCL | O_NOFOLLOW makes a new regular
    // file or fails with EEXIST, whatever sits at the name (then looked at below, to say what).
    // One lookup less, a round trip where CIPHERDIR is on a network share.
    if (create && (flags & O_EXCL) && type == FileType::Regular && attempt == 0) {
      int fd = ::openat(parent, leaf.c_str(), io_flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
      if (fd >= 0) {
        int fl = ::fcntl(fd, F_GETFL);
        if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        r.fd.reset(fd);
        return r;
      }
      if (errno != EEXIST) {
        r.error = errno;
        return r;
      }
    }
    // Look first, with O_PATH: it never blocks on a FIFO and never runs a device's open.
    int pfd = ::openat(parent, leaf.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0) {
      int e = errno;
      if (e != ENOENT || !create || type != FileType::Regular) {
        r.error = e;
        return r;
      }
      int fd = ::openat(parent, leaf.c_str(), io_flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
      if (fd < 0 && errno == EEXIST) continue;  // appeared meanwhile: look at what it is
      if (fd < 0) {
        r.error = errno;
        return r;
      }
      int fl = ::fcntl(fd, F_GETFL);
      if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
      r.fd.reset(fd);
      return r;
    }
    UniqueFd path_fd(pfd);
    struct stat st {};
    if (::fstat(pfd, &st) != 0) {
      r.error = errno;
      return r;
    }
    if (S_ISLNK(st.st_mode)) {
      r.error = ELOOP;
      r.found_type = S_IFLNK;
      return r;
    }
    if (!type_matches(st.st_mode, type)) {
      r.error = EUCLEAN;
      r.found_type = st.st_mode & S_IFMT;
      return r;
    }
    if (create && (flags & O_EXCL)) {
      r.error = EEXIST;
      return r;
    }
    if (flags & O_PATH) {
      r.fd = std::move(path_fd);
      return r;
    }
    int fd = type == FileType::Directory ? reopen(pfd, parent, leaf, O_RDONLY | O_DIRECTORY, st)
                                         : reopen(pfd, parent, leaf, io_flags, st);
    if (fd == -EAGAIN) continue;
    if (fd < 0) {
      r.error = -fd;
      return r;
    }
    r.fd.reset(fd);
    return r;
  }
  r.error = EAGAIN;  // kept changing under us: someone is playing with CIPHERDIR
  return r;
}

int read_capped(int fd, std::size_t max_bytes, std::vector<std::uint8_t>* out) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EUCLEAN;
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > max_bytes) return -EFBIG;
  // One byte more than fstat said is asked for, so a file that grew meanwhile is still caught.
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_bytes) return -EFBIG;
  if (got == buf.size()) return -EAGAIN;  // still growing: someone is writing it now
  buf.resize(got);
  *out = std::move(buf);
  return 0;
}

}  // namespace gcfs
