// The setuid and setgid rules of a local Linux filesystem (ext4), for the requests that change a
// file: which of S_ISUID and S_ISGID a write, truncate, fallocate, hole punch, chown or chmod
// leaves. The FUSE kernel applies only part of them (it clears S_ISGID only together with group
// execute, and forgets the caller's group membership), so the daemon applies them all itself.
// No FUSE headers here: the caller's credentials come in as a plain struct (caller_creds.h).
#pragma once

#include <sys/types.h>

#include <vector>

namespace gcfs::mount {

struct CallerCreds {
  uid_t uid = 0;
  gid_t gid = 0;                // the filesystem gid the kernel sent
  std::vector<gid_t> groups;    // supplementary groups
  bool cap_fsetid = false;      // CAP_FSETID in the caller's effective set
  bool cap_sys_admin = false;   // CAP_SYS_ADMIN: sees trusted.* attributes
  bool in_group(gid_t g) const;
  // The kernel's in_group_or_capable(): keeps S_ISGID on files of group g.
  bool in_group_or_capable(gid_t g) const { return cap_fsetid || in_group(g); }
};

// What a SETATTR request asks, as far as these rules care.
struct SetattrRequest {
  bool mode = false;   // new permission bits (chmod, or the kernel's own clearing of the bits)
  mode_t new_mode = 0;
  bool owner = false;  // chown or chgrp
  gid_t new_gid = static_cast<gid_t>(-1);  // when the group changes, else -1
  bool size = false;   // truncate
  // Nothing else asked: the kernel's "remove privileges" call, sent by a write, fallocate or hole
  // punch that changes the file.
  bool remove_privileges = false;
};

// The mode the file must have after the request (permission and setid bits, 07777), given its
// current mode (with the file type) and group. Equal to the mode it would have anyway when no
// rule applies.
mode_t mode_after_setattr(mode_t current, gid_t current_gid, const SetattrRequest& request, const CallerCreds& caller);

}  // namespace gcfs::mount
