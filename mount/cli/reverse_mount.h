// gpucryptfs mount --reverse: unlock PLAINDIR's reverse config and serve the read-only encrypted
// view (fs/reverse_view.h, mount/daemon/reverse_fs.h) on MOUNTPOINT.
#pragma once

#include <string>

#include "mount/engines/engine_factory.h"
#include "mount/lifecycle/fuse_runner.h"
#include "mount/cli/password.h"
#include "fs/path_exclusions.h"

namespace gcfs::cli {

// What only reverse mode takes: the control socket's path (empty: none) and the exclusions.
struct ReverseExtras {
  std::string ctlsock;
  PathExclusions exclusions;
};

int mount_reverse(const std::string& plaindir, mount::MountOptions mo, const EngineOptions& engine,
                  const PasswordSource& pw_src, const std::string& log_file, bool allow_expensive_kdf,
                  const ReverseExtras& extras);

}  // namespace gcfs::cli
