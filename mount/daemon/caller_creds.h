// The credentials of the process behind a FUSE request, for the rules that depend on them
// (setid_rules.h): uid and gid from the request, the supplementary groups and CAP_FSETID from
// /proc, counted only in the daemon's user namespace. A caller that is gone by now counts as
// holding no capability and no other group, which clears at most bits that an unprivileged caller
// would have cleared.
#pragma once

#include "mount/fuse_api.h"
#include "mount/daemon/setid_rules.h"

namespace gcfs::mount {

// KillSetid: the request carries the kernel's own verdict that the caller lacks CAP_FSETID
// (FUSE_WRITE_KILL_SUIDGID on a WRITE, FATTR_KILL_SUIDGID on a SETATTR): it is honoured as given.
enum class KernelSays { Nothing, KillSetid };

// Capabilities count only where the caller is in the daemon's own user namespace.
CallerCreds caller_creds(fuse_req_t req, KernelSays kernel = KernelSays::Nothing);

}  // namespace gcfs::mount
