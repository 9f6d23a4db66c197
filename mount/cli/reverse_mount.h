// gpucryptfs mount --reverse: unlock PLAINDIR's reverse config and serve the read-only encrypted
// view (fs/reverse_view.h, mount/daemon/reverse_fs.h) on MOUNTPOINT.
#pragma once

#include <string>

#include "mount/engines/engine_factory.h"
#include "mount/lifecycle/fuse_runner.h"
#include "mount/cli/password.h"

namespace gcfs::cli {

int mount_reverse(const std::string& plaindir, mount::MountOptions mo, const EngineOptions& engine,
                  const PasswordSource& pw_src, const std::string& log_file, bool allow_expensive_kdf);

}  // namespace gcfs::cli
