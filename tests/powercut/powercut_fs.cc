// powercut_fs BACKING MOUNTPOINT: the power-cut harness (README.md in this folder). Serves the
// tree under BACKING from memory through libfuse's high-level API, single-threaded, with nothing
// cached by the kernel (direct_io, zero timeouts), so that every read sees the model and every
// write reaches it when it is made. MOUNTPOINT/.powercut takes the commands and reports the state.
#define FUSE_USE_VERSION 35
#include <fuse.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "disk_image.h"
#include "volatile_disk.h"

namespace powercut {
namespace {

constexpr const char* kControlPath = "/.powercut";
constexpr std::uint64_t kControlHandle = ~0ull;

struct Harness {
  VolatileDisk disk;
  std::string backing;
  std::string last_error;
  bool trace = false;
};

Harness& harness() { return *static_cast<Harness*>(fuse_get_context()->private_data); }
VolatileDisk& disk() { return harness().disk; }

bool is_control(const char* path) { return path && std::strcmp(path, kControlPath) == 0; }

// The inode of an open file (its handle), else of the path.
std::int64_t inode_of(const char* path, const fuse_file_info* fi) {
  if (fi && fi->fh != 0 && fi->fh != kControlHandle) return static_cast<std::int64_t>(fi->fh);
  if (!path) return -EBADF;
  return disk().resolve(path);
}

// The parent's inode and the last name of path.
std::int64_t split(const char* path, std::string* name) {
  const std::string p(path);
  const auto slash = p.rfind('/');
  *name = p.substr(slash + 1);
  return disk().resolve(slash == 0 ? "/" : p.substr(0, slash));
}

void fill_stat(Ino ino, const Node& n, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = ino;
  st->st_mode = n.mode;
  st->st_uid = n.uid;
  st->st_gid = n.gid;
  st->st_rdev = n.rdev;
  st->st_size = static_cast<off_t>(n.data.size());
  st->st_blksize = 4096;
  st->st_blocks = static_cast<blkcnt_t>((n.data.size() + 511) / 512);
  st->st_atim = n.atime;
  st->st_mtim = n.mtime;
  st->st_ctim = n.ctime;
  st->st_nlink = n.nlink;
  if (n.is_dir()) {
    st->st_nlink = 2;
    for (const auto& [name, child] : n.entries) {
      const Node* c = disk().node(child);
      if (c && c->is_dir()) ++st->st_nlink;
    }
  }
}

bool is_number(const std::string& s) {
  return !s.empty() && s.size() < 19 && s.find_first_not_of("0123456789") == std::string::npos;
}

// Runs one command line (README.md, "Commands"); returns 0, or -EINVAL with the reason kept for
// the status.
int run_command(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string word; in >> word;) w.push_back(word);
  VolatileDisk& d = disk();
  int rc = 0;
  if (w.size() == 1 && w[0] == "sync") {
    d.sync_all();
  } else if (w.size() == 2 && w[0] == "cut") {
    const auto tear = w[1] == "drop" ? Tear{} : w[1] == "keep" ? std::optional<Tear>(Tear{Tear::Kind::all, 0})
                                                                : parse_tear(w[1]);
    if (tear) d.cut(*tear);
    else rc = -EINVAL;
  } else if ((w.size() == 3 || w.size() == 4) && w[0] == "arm" && is_number(w[1]) && std::stoull(w[1]) > 0 &&
             parse_tear(w[2]) && (w.size() == 3 || w[3] == "drop-earlier")) {
    d.arm(std::stoull(w[1]), *parse_tear(w[2]), w.size() == 3);
  } else if (w.size() == 1 && w[0] == "disarm") {
    d.disarm();
  } else if (w.size() == 1 && w[0] == "boot") {
    d.boot();
  } else {
    rc = -EINVAL;
  }
  harness().last_error = rc == 0 ? "" : "bad command: " + line.substr(0, line.find('\n'));
  if (rc == 0 && d.dead()) {
    try {  // the backing directory holds what survived, for anyone to look at
      save_tree(d.durable(), harness().backing);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "powercut_fs: %s\n", e.what());
    }
  }
  return rc;
}

std::string control_text() {
  std::string s = disk().status();
  if (!harness().last_error.empty()) s += harness().last_error + "\n";
  return s;
}

// While the power is off, nothing but the control file answers.
#define POWERCUT_ALIVE() \
  do {                   \
    if (disk().dead()) return -EIO; \
  } while (0)

int op_getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  if (is_control(path) || (fi && fi->fh == kControlHandle)) {
    std::memset(st, 0, sizeof *st);
    st->st_mode = S_IFREG | 0600;
    st->st_nlink = 1;
    st->st_size = static_cast<off_t>(control_text().size());
    return 0;
  }
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  fill_stat(static_cast<Ino>(ino), *disk().node(static_cast<Ino>(ino)), st);
  return 0;
}

int op_open(const char* path, fuse_file_info* fi) {
  fi->direct_io = 1;
  if (is_control(path)) {
    fi->fh = kControlHandle;
    return 0;
  }
  POWERCUT_ALIVE();
  const std::int64_t ino = disk().resolve(path);
  if (ino < 0) return static_cast<int>(ino);
  fi->fh = static_cast<std::uint64_t>(ino);
  return 0;
}

int make(const char* path, mode_t mode, dev_t rdev, const std::string& data, std::int64_t* ino_out) {
  POWERCUT_ALIVE();
  if (is_control(path)) return -EEXIST;
  std::string name;
  const std::int64_t parent = split(path, &name);
  if (parent < 0) return static_cast<int>(parent);
  const fuse_context* c = fuse_get_context();
  const std::int64_t ino = disk().create(static_cast<Ino>(parent), name, mode, rdev, data, c->uid, c->gid);
  if (ino_out) *ino_out = ino;
  return ino < 0 ? static_cast<int>(ino) : 0;
}

int op_create(const char* path, mode_t mode, fuse_file_info* fi) {
  std::int64_t ino = 0;
  const int rc = make(path, S_IFREG | (mode & 07777), 0, "", &ino);
  if (rc != 0) return rc;
  fi->fh = static_cast<std::uint64_t>(ino);
  fi->direct_io = 1;
  return 0;
}
int op_mknod(const char* path, mode_t mode, dev_t rdev) { return make(path, mode, rdev, "", nullptr); }
int op_mkdir(const char* path, mode_t mode) { return make(path, S_IFDIR | (mode & 07777), 0, "", nullptr); }
int op_symlink(const char* target, const char* path) { return make(path, S_IFLNK | 0777, 0, target, nullptr); }

int op_readlink(const char* path, char* buf, size_t size) {
  POWERCUT_ALIVE();
  const std::int64_t ino = disk().resolve(path);
  if (ino < 0) return static_cast<int>(ino);
  const Node* n = disk().node(static_cast<Ino>(ino));
  if (!S_ISLNK(n->mode)) return -EINVAL;
  if (size == 0) return -EINVAL;
  const std::size_t len = std::min(size - 1, n->data.size());
  std::memcpy(buf, n->data.data(), len);
  buf[len] = '\0';
  return 0;
}

int remove_name(const char* path, bool dir) {
  POWERCUT_ALIVE();
  std::string name;
  const std::int64_t parent = split(path, &name);
  if (parent < 0) return static_cast<int>(parent);
  return disk().remove(static_cast<Ino>(parent), name, dir);
}
int op_unlink(const char* path) { return remove_name(path, false); }
int op_rmdir(const char* path) { return remove_name(path, true); }

int op_rename(const char* from, const char* to, unsigned int flags) {
  POWERCUT_ALIVE();
  std::string a, b;
  const std::int64_t pa = split(from, &a), pb = split(to, &b);
  if (pa < 0) return static_cast<int>(pa);
  if (pb < 0) return static_cast<int>(pb);
  return disk().rename(static_cast<Ino>(pa), a, static_cast<Ino>(pb), b, flags);
}

int op_link(const char* from, const char* to) {
  POWERCUT_ALIVE();
  const std::int64_t ino = disk().resolve(from);
  if (ino < 0) return static_cast<int>(ino);
  std::string name;
  const std::int64_t parent = split(to, &name);
  if (parent < 0) return static_cast<int>(parent);
  return disk().link(static_cast<Ino>(ino), static_cast<Ino>(parent), name);
}

int op_chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  Node* n = disk().mutable_node(static_cast<Ino>(ino));
  n->mode = (n->mode & S_IFMT) | (mode & 07777);
  disk().touch_ctime(static_cast<Ino>(ino));
  return 0;
}

int op_chown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi) {
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  Node* n = disk().mutable_node(static_cast<Ino>(ino));
  if (uid != static_cast<uid_t>(-1)) n->uid = uid;
  if (gid != static_cast<gid_t>(-1)) n->gid = gid;
  disk().touch_ctime(static_cast<Ino>(ino));
  return 0;
}

int op_truncate(const char* path, off_t size, fuse_file_info* fi) {
  if (is_control(path) || (fi && fi->fh == kControlHandle)) return 0;  // `echo cmd > .powercut`
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  return disk().truncate(static_cast<Ino>(ino), static_cast<std::uint64_t>(size));
}

int op_utimens(const char* path, const timespec tv[2], fuse_file_info* fi) {
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  Node* n = disk().mutable_node(static_cast<Ino>(ino));
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  for (int i = 0; i < 2; ++i) {
    if (tv[i].tv_nsec == UTIME_OMIT) continue;
    (i == 0 ? n->atime : n->mtime) = tv[i].tv_nsec == UTIME_NOW ? now : tv[i];
  }
  n->ctime = now;
  return 0;
}

int op_read(const char* path, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  if (fi->fh == kControlHandle || is_control(path)) {
    const std::string s = control_text();
    if (static_cast<std::size_t>(off) >= s.size()) return 0;
    const std::size_t len = std::min(size, s.size() - static_cast<std::size_t>(off));
    std::memcpy(buf, s.data() + off, len);
    return static_cast<int>(len);
  }
  POWERCUT_ALIVE();
  return static_cast<int>(disk().read(fi->fh, static_cast<std::uint64_t>(off), buf, size));
}

int op_write(const char* path, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  if (fi->fh == kControlHandle || is_control(path)) {
    const int rc = run_command(std::string(buf, size));
    return rc == 0 ? static_cast<int>(size) : rc;
  }
  if (harness().trace)  // POWERCUT_TRACE=1: which write is which, to choose where to cut
    std::fprintf(stderr, "powercut_fs: write %llu: inode %llu offset %lld, %zu bytes\n",
                 static_cast<unsigned long long>(disk().writes() + 1), static_cast<unsigned long long>(fi->fh),
                 static_cast<long long>(off), size);
  const bool was_dead = disk().dead();
  const auto rc = disk().write(fi->fh, static_cast<std::uint64_t>(off), buf, size);
  if (!was_dead && disk().dead()) run_command("disarm");  // an armed cut came: save what survived
  return static_cast<int>(rc);
}

int op_fsync(const char* path, int, fuse_file_info* fi) {
  if (fi && fi->fh == kControlHandle) return 0;
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  return disk().fsync(static_cast<Ino>(ino));
}

int op_opendir(const char* path, fuse_file_info* fi) {
  POWERCUT_ALIVE();
  const std::int64_t ino = disk().resolve(path);
  if (ino < 0) return static_cast<int>(ino);
  if (!disk().node(static_cast<Ino>(ino))->is_dir()) return -ENOTDIR;
  fi->fh = static_cast<std::uint64_t>(ino);
  return 0;
}

int op_fsyncdir(const char* path, int, fuse_file_info* fi) {
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  return disk().fsync(static_cast<Ino>(ino));
}

int op_fallocate(const char* path, int mode, off_t off, off_t len, fuse_file_info* fi) {
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  const Ino i = static_cast<Ino>(ino);
  if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) || mode == FALLOC_FL_ZERO_RANGE ||
      mode == (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)) {
    const int rc = disk().punch_zeros(i, static_cast<std::uint64_t>(off), static_cast<std::uint64_t>(len));
    if (rc != 0 || (mode & FALLOC_FL_KEEP_SIZE)) return rc;
  } else if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE) {
    return -EOPNOTSUPP;
  }
  const std::uint64_t end = static_cast<std::uint64_t>(off) + static_cast<std::uint64_t>(len);
  if (!(mode & FALLOC_FL_KEEP_SIZE) && end > disk().node(i)->data.size()) return disk().truncate(i, end);
  return 0;
}

int op_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info* fi, fuse_readdir_flags) {
  POWERCUT_ALIVE();
  const std::int64_t ino = inode_of(path, fi);
  if (ino < 0) return static_cast<int>(ino);
  const Node* dir = disk().node(static_cast<Ino>(ino));
  if (!dir->is_dir()) return -ENOTDIR;
  fill(buf, ".", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  fill(buf, "..", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
  for (const auto& [name, child] : dir->entries) {
    struct stat st {};
    st.st_ino = child;
    st.st_mode = disk().node(child)->mode;
    fill(buf, name.c_str(), &st, 0, static_cast<fuse_fill_dir_flags>(0));
  }
  return 0;
}

int op_statfs(const char*, struct statvfs* st) {
  std::memset(st, 0, sizeof *st);
  st->f_bsize = st->f_frsize = 4096;
  st->f_blocks = st->f_bfree = st->f_bavail = 1ull << 24;  // 64 GiB: the model is bounded by memory
  st->f_files = st->f_ffree = 1ull << 20;
  st->f_namemax = 255;
  return 0;
}

int op_setxattr(const char* path, const char* name, const char* value, size_t size, int flags) {
  POWERCUT_ALIVE();
  const std::int64_t ino = disk().resolve(path);
  if (ino < 0) return static_cast<int>(ino);
  auto& x = disk().mutable_node(static_cast<Ino>(ino))->xattrs;
  const bool exists = x.count(name) != 0;
  if ((flags & XATTR_CREATE) && exists) return -EEXIST;
  if ((flags & XATTR_REPLACE) && !exists) return -ENODATA;
  x[name] = std::string(value, size);
  disk().touch_ctime(static_cast<Ino>(ino));
  return 0;
}

int op_getxattr(const char* path, const char* name, char* value, size_t size) {
  POWERCUT_ALIVE();
  const std::int64_t ino = disk().resolve(path);
  if (ino < 0) return static_cast<int>(ino);
  const auto& x = disk().node(static_cast<Ino>(ino))->xattrs;
  const auto it = x.find(name);
  if (it == x.end()) return -ENODATA;
  if (size == 0) return static_cast<int>(it->second.size());
  if (size < it->second.size()) return -ERANGE;
  std::memcpy(value, it->second.data(), it->second.size());
  return static_cast<int>(it->second.size());
}

int op_listxattr(const char* path, char* list, size_t size) {
  POWERCUT_ALIVE();
  const std::int64_t ino = disk().resolve(path);
  if (ino < 0) return static_cast<int>(ino);
  std::string names;
  for (const auto& [name, value] : disk().node(static_cast<Ino>(ino))->xattrs) names += name + '\0';
  if (size == 0) return static_cast<int>(names.size());
  if (size < names.size()) return -ERANGE;
  std::memcpy(list, names.data(), names.size());
  return static_cast<int>(names.size());
}

int op_removexattr(const char* path, const char* name) {
  POWERCUT_ALIVE();
  const std::int64_t ino = disk().resolve(path);
  if (ino < 0) return static_cast<int>(ino);
  if (disk().mutable_node(static_cast<Ino>(ino))->xattrs.erase(name) == 0) return -ENODATA;
  disk().touch_ctime(static_cast<Ino>(ino));
  return 0;
}

void* op_init(fuse_conn_info*, fuse_config* cfg) {
  cfg->use_ino = 1;
  cfg->hard_remove = 1;  // an unlinked open file stays reachable through its handle (fh = inode)
  cfg->direct_io = 1;
  cfg->kernel_cache = 0;
  cfg->entry_timeout = cfg->attr_timeout = cfg->negative_timeout = 0;
  cfg->nullpath_ok = 1;
  return fuse_get_context()->private_data;
}

fuse_operations operations() {
  fuse_operations o{};
  o.init = op_init;
  o.getattr = op_getattr;
  o.readlink = op_readlink;
  o.mknod = op_mknod;
  o.mkdir = op_mkdir;
  o.unlink = op_unlink;
  o.rmdir = op_rmdir;
  o.symlink = op_symlink;
  o.rename = op_rename;
  o.link = op_link;
  o.chmod = op_chmod;
  o.chown = op_chown;
  o.truncate = op_truncate;
  o.open = op_open;
  o.read = op_read;
  o.write = op_write;
  o.statfs = op_statfs;
  o.fsync = op_fsync;
  o.setxattr = op_setxattr;
  o.getxattr = op_getxattr;
  o.listxattr = op_listxattr;
  o.removexattr = op_removexattr;
  o.readdir = op_readdir;
  o.opendir = op_opendir;
  o.fsyncdir = op_fsyncdir;
  o.create = op_create;
  o.utimens = op_utimens;
  o.fallocate = op_fallocate;
  return o;
}

}  // namespace
}  // namespace powercut

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BACKING MOUNTPOINT (runs in the foreground; README.md says more)\n", argv[0]);
    return 2;
  }
  powercut::Harness h;
  char* backing = ::realpath(argv[1], nullptr);  // libfuse changes to / before serving
  if (!backing) {
    std::fprintf(stderr, "powercut_fs: %s: %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  h.backing = backing;
  const char* trace = std::getenv("POWERCUT_TRACE");
  h.trace = trace && std::string(trace) == "1";
  std::free(backing);
  try {
    h.disk.load_durable(powercut::load_tree(h.backing));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "powercut_fs: %s\n", e.what());
    return 1;
  }
  char opts[] = "-ofsname=powercut,subtype=powercut,allow_other";
  char fg[] = "-f", single[] = "-s";
  char* args[] = {argv[0], fg, single, opts, argv[2], nullptr};
  const fuse_operations ops = powercut::operations();
  const int rc = fuse_main(5, args, &ops, &h);
  // Unmounting is a cut too: what was never fsynced (or synced with the `sync` command) is lost.
  h.disk.cut(powercut::Tear{});
  try {
    powercut::save_tree(h.disk.durable(), h.backing);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "powercut_fs: %s\n", e.what());
    return 1;
  }
  return rc;
}
