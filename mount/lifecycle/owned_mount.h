// A FUSE mount that the daemon made itself (as root), known from then on by its identity, never
// by its path again.
//
// Why: a path is looked up anew each time it is used. A user who owns a folder above the
// mountpoint can rename that folder and leave a symbolic link in its place; a root daemon that
// mounted, or later unmounted, "the mountpoint" by its path then reached wherever the link led
// (mount(2) follows links anywhere in a path, and umount2's UMOUNT_NOFOLLOW guards only the last
// name): another user's filesystem was unmounted while the vault stayed mounted.
//
// So the mountpoint is opened once, with no symbolic link followed anywhere in its path
// (openat2 RESOLVE_NO_SYMLINKS), and the mount is made with the new mount API (fsopen, fsmount)
// and attached to exactly that directory (move_mount on the descriptor); the mount descriptor gives
// the new mount's ID before anything else can reach it. An unmount looks the ID up in
// /proc/self/mountinfo to find where the mount is now, opens that place's parent folder with no
// symbolic link followed, checks that what sits there under the last name is this mount's root
// (statx: mount ID and STATX_ATTR_MOUNT_ROOT), and unmounts that name relative to the verified
// folder. A name that is a mountpoint can be neither renamed nor removed (EBUSY), so it still
// leads to the mount when umount2 resolves it; anything else is refused, with a log line.
//
// Nothing here stats the mount's root in a way that asks the daemon: a getattr of our own root
// would wait for INIT, or for serving threads that may have stopped. AT_STATX_DONT_SYNC with a
// request mask of the mount ID alone is answered by the kernel from what it holds.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "mount/lifecycle/kernel_mount_options.h"

namespace gcfs::mount {

enum class UnmountResult {
  Unmounted,
  Busy,     // something holds the mount (an open file, a working directory): EBUSY
  Gone,     // the mount is no longer listed: someone else unmounted it
  Refused,  // the mount could not be verified where it is listed: left alone (logged)
};

class OwnedMount {
 public:
  // Mounts a FUSE filesystem, served through a new /dev/fuse descriptor, on the directory that
  // the absolute path mountpoint names, reached without following any symbolic link. Throws
  // MountFailure: with bad_mountpoint_code when the path now holds a symbolic link or is no
  // directory, else 1 with the kernel's reason.
  static std::unique_ptr<OwnedMount> mount(const std::string& mountpoint, const KernelMountOptions& options,
                                           int bad_mountpoint_code);
  ~OwnedMount();
  OwnedMount(const OwnedMount&) = delete;
  OwnedMount& operator=(const OwnedMount&) = delete;

  // The /dev/fuse descriptor, handed over once (to libfuse, which closes it).
  int release_fuse_fd();
  int mount_id() const { return mount_id_; }
  // "major:minor" of the mount's filesystem, read from mountinfo when it was made; "" when it
  // was not listed then.
  const std::string& device() const { return device_; }

  // Unmounts this mount wherever it is now, if what is there is this mount; detaching it
  // (MNT_DETACH) when lazy. Calls from several threads take turns.
  UnmountResult unmount(bool lazy);

  // Whether the FUSE connection behind session descriptor fd has ended (the kernel unmounted the
  // filesystem: fusermount3 -u, umount, a connection abort). Then there is nothing to unmount, and
  // this mount's ID may already be another mount's.
  static bool connection_ended(int fd);

 private:
  OwnedMount() = default;
  std::string mounted_on_;
  int fuse_fd_ = -1;
  int mount_id_ = 0;
  // "major:minor" of the mount's filesystem, read when it was made. While the connection lives no
  // other filesystem has that number, so a listed mount of this ID and this device is this one,
  // on a kernel without unique mount IDs too (32-bit IDs are reused within seconds).
  std::string device_;
  std::uint64_t unique_id_ = 0;  // STATX_MNT_ID_UNIQUE (Linux 6.8): never reused; 0 where unknown
  std::mutex mu_;
};

}  // namespace gcfs::mount
