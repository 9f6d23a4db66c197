// A mount a root daemon made itself, unmounted by its identity (owned_mount.h).
#include "mount/lifecycle/owned_mount.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fs/log.h"
#include "fs/unique_fd.h"
#include "mount/lifecycle/fuse_runner.h"
#include "mount/lifecycle/mount_table.h"

// Linux 6.8's never-reused mount ID; older uapi headers do not name it.
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

namespace gcfs::mount {
namespace {

std::string error_text(int e) { return std::strerror(e); }

// A directory reached from path without following any symbolic link, magic ones (/proc/PID/fd)
// included. -errno on failure (ELOOP: a link was in the way).
int open_directory_no_symlinks(const std::string& path) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const long fd = ::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
  return fd >= 0 ? static_cast<int>(fd) : -errno;
}

// The kernel's own words on why a mount call failed, when it left some in the context ("e fuse:
// blksize only supported for fuseblk"), else "".
std::string context_message(int fs_fd) {
  char buf[512];
  const ssize_t n = ::read(fs_fd, buf, sizeof buf - 1);
  if (n <= 2) return "";
  std::string m(buf, static_cast<std::size_t>(n));
  if (m.size() > 2 && m[1] == ' ') m = m.substr(2);  // "e ", "w ", "i ": the message's level
  while (!m.empty() && m.back() == '\n') m.pop_back();
  return m;
}

// The mount IDs of what a descriptor, or the name under a directory descriptor, leads to, with
// nothing asked of the filesystem (see owned_mount.h). False when statx failed.
struct Identity {
  int mount_id = 0;
  std::uint64_t unique_id = 0;  // 0: this kernel does not tell
  bool mount_root = false;
  bool mount_root_known = false;
};
bool identity_of(int dir_fd, const char* name, int flags, Identity* out) {
  flags |= AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT;
  struct statx stx {};
  if (::statx(dir_fd, name, flags, STATX_MNT_ID, &stx) != 0 || !(stx.stx_mask & STATX_MNT_ID)) return false;
  out->mount_id = static_cast<int>(stx.stx_mnt_id);
  out->mount_root_known = (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0;
  out->mount_root = (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  struct statx unique {};
  if (::statx(dir_fd, name, flags, STATX_MNT_ID_UNIQUE, &unique) == 0 && (unique.stx_mask & STATX_MNT_ID_UNIQUE))
    out->unique_id = unique.stx_mnt_id;
  return true;
}

}  // namespace

std::unique_ptr<OwnedMount> OwnedMount::mount(const std::string& mountpoint, const KernelMountOptions& o,
                                              int bad_mountpoint_code) {
  const std::string where = "cannot mount on " + mountpoint + ": ";
  const int dir = open_directory_no_symlinks(mountpoint);
  if (dir == -ELOOP)
    throw MountFailure(bad_mountpoint_code, "mountpoint " + mountpoint +
                                                ": a symbolic link is in its path now (the path was resolved when the "
                                                "mount began); not mounting where it leads");
  if (dir == -ENOSYS) throw MountFailure(1, where + "mounting as root needs Linux 5.6 or later (openat2)");
  if (dir < 0) throw MountFailure(bad_mountpoint_code, "mountpoint " + mountpoint + ": " + error_text(-dir));
  UniqueFd dir_fd(dir);

  std::unique_ptr<OwnedMount> m(new OwnedMount);
  m->mounted_on_ = mountpoint;
  m->fuse_fd_ = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (m->fuse_fd_ < 0) throw MountFailure(1, where + "/dev/fuse: " + error_text(errno) + " (is the fuse module loaded?)");

  UniqueFd fs(::fsopen("fuse", FSOPEN_CLOEXEC));
  if (!fs) throw MountFailure(1, where + "fsopen(\"fuse\"): " + error_text(errno));
  const auto refused = [&](const std::string& what) {
    const int e = errno;
    const std::string kernel = context_message(fs.get());
    return MountFailure(1, where + "the kernel refused " + what + ": " + error_text(e) +
                               (kernel.empty() ? "" : " (" + kernel + ")"));
  };
  const auto set = [&](const std::string& key, const std::string& value, const std::string& shown) {
    if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, key.c_str(), value.c_str(), 0) != 0) throw refused(shown);
  };
  const auto flag = [&](const char* key, const std::string& shown) {
    if (::fsconfig(fs.get(), FSCONFIG_SET_FLAG, key, nullptr, 0) != 0) throw refused(shown);
  };
  // What libfuse's mount(2) gave the kernel: the descriptor, the root's type, the owner.
  set("fd", std::to_string(m->fuse_fd_), "fd");
  set("rootmode", "40000", "rootmode");
  set("user_id", std::to_string(::getuid()), "user_id");
  set("group_id", std::to_string(::getgid()), "group_id");
  set("source", o.source, "fsname=" + o.source);
  if (!o.subtype.empty()) set("subtype", o.subtype, "subtype=" + o.subtype);
  for (const auto& f : o.flags) flag(f.c_str(), "-o " + f);
  for (const auto& [k, v] : o.values) set(k, v, "-o " + k + "=" + v);
  // mount(2) puts these on the superblock; the new API takes them as the context's flags.
  if (o.ms_flags & MS_RDONLY) flag("ro", "-o ro");
  if (o.ms_flags & MS_SYNCHRONOUS) flag("sync", "-o sync");
  if (o.ms_flags & MS_DIRSYNC) flag("dirsync", "-o dirsync");
  if (::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) throw refused("the mount");

  // And these on the mount. Access times: relatime unless noatime, as mount(2) chooses by default.
  unsigned attrs = 0;
  if (o.ms_flags & MS_RDONLY) attrs |= MOUNT_ATTR_RDONLY;
  if (o.ms_flags & MS_NOSUID) attrs |= MOUNT_ATTR_NOSUID;
  if (o.ms_flags & MS_NODEV) attrs |= MOUNT_ATTR_NODEV;
  if (o.ms_flags & MS_NOEXEC) attrs |= MOUNT_ATTR_NOEXEC;
  attrs |= (o.ms_flags & MS_NOATIME) ? MOUNT_ATTR_NOATIME : MOUNT_ATTR_RELATIME;
  UniqueFd mnt(::fsmount(fs.get(), FSMOUNT_CLOEXEC, attrs));
  if (!mnt) throw refused("the mount's flags");
  // The new mount's identity, before it is attached anywhere anyone could reach.
  Identity id;
  if (!identity_of(mnt.get(), "", AT_EMPTY_PATH, &id))
    throw MountFailure(1, where + "cannot read the new mount's ID: " + error_text(errno));
  m->mount_id_ = id.mount_id;
  m->unique_id_ = id.unique_id;
  if (::move_mount(mnt.get(), "", dir_fd.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    throw MountFailure(1, where + "move_mount: " + error_text(errno));
  // Listed now, under the ID read from the descriptor (nobody can have unmounted it yet: the
  // connection is ours and the mount was attached a moment ago).
  if (const auto e = find_mount(m->mount_id_)) m->device_ = e->device;
  // Neither descriptor is kept: one held on the mount would make every unmount fail with EBUSY.
  return m;
}

bool OwnedMount::connection_ended(int fd) {
  // As libfuse's own unmount tells it: /dev/fuse polls with POLLERR once the connection is gone.
  pollfd p{};
  p.fd = fd;
  p.events = 0;
  return fd >= 0 && ::poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

OwnedMount::~OwnedMount() {
  if (fuse_fd_ >= 0) ::close(fuse_fd_);
}

int OwnedMount::release_fuse_fd() {
  const int fd = fuse_fd_;
  fuse_fd_ = -1;
  return fd;
}


UnmountResult OwnedMount::unmount(bool lazy) {
  std::lock_guard lk(mu_);
  bool readable = false;
  const auto entry = find_mount(mount_id_, &readable);
  if (!readable) {
    log::warning("not unmounting mount ID " + std::to_string(mount_id_) +
                 ": /proc/self/mountinfo cannot be read, so where it is cannot be told");
    return UnmountResult::Refused;
  }
  // Listed under this ID, but another filesystem: ours is gone and its ID was given again.
  if (!entry || (!device_.empty() && entry->device != device_)) return UnmountResult::Gone;
  const std::string& path = entry->mountpoint;
  const auto refuse = [&](const std::string& why) {
    log::warning("not unmounting " + path + " (mount ID " + std::to_string(mount_id_) + "): " + why);
    return UnmountResult::Refused;
  };
  const auto slash = path.rfind('/');
  if (path.empty() || path[0] != '/' || slash == std::string::npos || slash + 1 == path.size())
    return refuse("the kernel lists it at a place that is no absolute path below /");
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  const int p = open_directory_no_symlinks(parent);
  if (p < 0)
    return refuse("its folder " + parent + " cannot be reached without following a symbolic link (" +
                  error_text(-p) + ")");
  UniqueFd parent_fd(p);
  Identity there;
  if (!identity_of(parent_fd.get(), name.c_str(), AT_SYMLINK_NOFOLLOW, &there))
    return refuse("cannot look at " + name + " in " + parent + ": " + error_text(errno));
  if (unique_id_ && there.mount_id == mount_id_ && there.unique_id && there.unique_id != unique_id_)
    return UnmountResult::Gone;  // the ID is another mount's now: ours went before
  if (there.mount_id != mount_id_ || (there.mount_root_known && !there.mount_root)) {
    // Listed there, yet another mount is what the name leads to: one mounted over ours, or the
    // folder changed between reading the list and opening it.
    return refuse("what " + path + " leads to now is not this mount's root (mount ID " +
                  std::to_string(there.mount_id) + ")");
  }
  // The verified folder through its descriptor, then the one name: no path is looked up again.
  const std::string target = "/proc/self/fd/" + std::to_string(parent_fd.get()) + "/" + name;
  if (::umount2(target.c_str(), UMOUNT_NOFOLLOW | (lazy ? MNT_DETACH : 0)) == 0) {
    if (path != mounted_on_) log::info("unmounted the mount where it had moved: " + path + " (mounted on " + mounted_on_ + ")");
    return UnmountResult::Unmounted;
  }
  const int e = errno;
  if (e == EBUSY) return UnmountResult::Busy;
  if (!find_mount(mount_id_)) return UnmountResult::Gone;
  return refuse(std::string("umount2: ") + error_text(e));
}

}  // namespace gcfs::mount
