// The command line that mount(8) and systemd use for a filesystem of type fuse.gpucryptfs:
//
//   /etc/fstab:  /srv/vault  /srv/plain  fuse.gpucryptfs  passfile=/etc/vault.pw,nofail  0 0
//   mount.fuse3 runs:          gpucryptfs /srv/vault /srv/plain -o OPTIONS
//   mount(8) runs a helper:    mount.fuse.gpucryptfs /srv/vault /srv/plain -o OPTIONS -t fuse.gpucryptfs
//
// translated into the `gpucryptfs mount` command line that does the same. Options of our own
// become mount's (passfile=F is --passfile F); those meant for mount(8) and systemd (nofail,
// _netdev, noauto, x-systemd.*, ...) are accepted and left alone; a few kernel mount flags pass
// through to the mount; anything else is refused by name, so a typo never mounts with a setting
// silently missing.
#pragma once

#include <string>
#include <vector>

namespace gcfs::cli {

// Whether argv is the mount helper's form: argv[0] named mount.* (a mount(8) helper link), or a
// first argument that is no command but a path (contains '/' or names a directory) followed by
// a second one. Never true for a subcommand's name.
bool is_mount_helper_call(int argc, char** argv);

struct HelperCommand {
  bool fake = false;               // mount -f: do everything but mount (we do nothing)
  std::vector<std::string> mount;  // argv for cmd_mount, starting with "mount"
};

// Throws boost::program_options::error (exit 2) naming an unknown option or flag, a missing
// SOURCE or MOUNTPOINT, or a value missing where one is needed.
HelperCommand translate_mount_helper_args(const std::vector<std::string>& args);

}  // namespace gcfs::cli
