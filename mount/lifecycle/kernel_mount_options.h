// The kernel's share of a mount's -o option string, for the mounts the daemon makes itself (as
// root: mount/lifecycle/owned_mount.h). libfuse 3.14 splits that string three ways when it mounts: options
// the kernel's FUSE filesystem takes (default_permissions, allow_other, max_read=...), mount flags
// (ro, noexec, noatime, ...) and its own settings (fsname=, subtype=, debug). The daemon still
// hands the whole string to fuse_session_new, which checks it as before (an unknown option is
// refused there), and mounts with what this split returns, so that every option libfuse accepts
// keeps the effect it had when libfuse mounted; the two it cannot give that way are refused by
// name instead of dropped.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gcfs::mount {

struct KernelMountOptions {
  // The mount's source as /proc/self/mountinfo shows it: fsname=, else subtype=, else /dev/fuse
  // (libfuse's choice).
  std::string source = "/dev/fuse";
  std::string subtype;  // the type is fuse.<subtype> (plain fuse when empty)
  // The FUSE filesystem's own parameters: flags (default_permissions, allow_other) and
  // name=value ones (max_read, blksize, the SELinux contexts), in the order given.
  std::vector<std::string> flags;
  std::vector<std::pair<std::string, std::string>> values;
  // MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_NOATIME, MS_SYNCHRONOUS, MS_DIRSYNC as libfuse
  // would pass them to mount(2): nosuid and nodev unless the options say suid or dev.
  unsigned long ms_flags = 0;
};

// Splits options (comma-separated, '\' escaping the next character, as fuse_opt reads them).
// Throws std::invalid_argument, with a message naming the option, for auto_unmount and blkdev
// and for anything libfuse 3.14 would not accept.
KernelMountOptions kernel_mount_options(const std::string& options);

}  // namespace gcfs::mount
