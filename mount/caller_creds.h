// The credentials of the process behind a FUSE request, for the rules that depend on them
// (setid_rules.h): uid and gid from the request, the supplementary groups and CAP_FSETID from
// /proc. A caller that is gone by now counts as holding no capability and no other group, which
// clears at most bits that an unprivileged caller would have cleared.
#pragma once

#include "mount/fuse_api.h"
#include "mount/setid_rules.h"

namespace gcfs::mount {

CallerCreds caller_creds(fuse_req_t req);

}  // namespace gcfs::mount
