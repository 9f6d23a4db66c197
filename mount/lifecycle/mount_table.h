// One mount's line of /proc/self/mountinfo, found by its mount ID: where the mount is now and
// which device it is, read without touching the mount itself (a stat of a FUSE mount's root can
// be a request to the daemon, and waits for INIT or for a serving thread).
#pragma once

#include <optional>
#include <string>

namespace gcfs::mount {

struct MountEntry {
  int id = 0;
  int parent = 0;
  std::string device;      // "major:minor"
  std::string mountpoint;  // as the kernel sees it now: moved when a folder above it was renamed
  std::string fstype;      // "fuse.gpucryptfs"
  std::string source;
};

// The mount with this ID in this process's mount namespace, or nullopt when it is not listed;
// *readable (when given) says whether the list could be read at all (no /proc: false).
std::optional<MountEntry> find_mount(int mount_id, bool* readable = nullptr);

// A mountinfo field with the kernel's octal escapes (\040 for a space, \134 for '\') undone.
std::string unescape_mountinfo(const std::string& field);

}  // namespace gcfs::mount
