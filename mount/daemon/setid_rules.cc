// The setuid and setgid rules of a local Linux filesystem, per request kind (setid_rules.h).
#include "mount/daemon/setid_rules.h"

#include <sys/stat.h>

#include <algorithm>

namespace gcfs::mount {
namespace {

// S_ISGID goes with the other bits when group execute is set (it then marks a setgid program)
// or when the caller could not have set it (neither in the group nor holding CAP_FSETID); without
// group execute it marks mandatory locking, which the owner's group keeps.
bool sgid_must_go(mode_t mode, gid_t gid, const CallerCreds& caller) {
  return (mode & S_ISGID) && ((mode & S_IXGRP) || !caller.in_group_or_capable(gid));
}

}  // namespace

bool CallerCreds::in_group(gid_t g) const {
  return g == gid || std::find(groups.begin(), groups.end(), g) != groups.end();
}

mode_t mode_after_setattr(mode_t current, gid_t current_gid, const SetattrRequest& r, const CallerCreds& caller) {
  mode_t mode = (r.mode ? r.new_mode : current) & 07777;
  const gid_t gid = r.owner && r.new_gid != static_cast<gid_t>(-1) ? r.new_gid : current_gid;
  // chmod: S_ISGID only from a caller in the file's group or holding CAP_FSETID (setattr_copy).
  if (r.mode && (mode & S_ISGID) && !caller.in_group_or_capable(gid)) mode &= ~S_ISGID;
  if (r.owner && !S_ISDIR(current) && !S_ISLNK(current)) {
    // chown_common, for every kind but a directory (FIFOs, sockets and devices too, as ext4 does
    // and pjdfstest chown/00 checks): S_ISUID always goes; S_ISGID by the rule above, judged on
    // the old group.
    mode &= ~S_ISUID;
    if (sgid_must_go(current, current_gid, caller)) mode &= ~S_ISGID;
  }
  if (!S_ISREG(current)) return mode;  // writes and truncates change regular files only
  if ((r.size || r.remove_privileges) && !caller.cap_fsetid) {
    // file_remove_privs / do_truncate: only a caller without CAP_FSETID loses the bits.
    mode &= ~S_ISUID;
    if (sgid_must_go(current, current_gid, caller)) mode &= ~S_ISGID;
  }
  return mode;
}

}  // namespace gcfs::mount
