// The generation every node of this mount is handed out with (fuse_entry_param::generation).
//
// Node IDs come from a counter that starts again at every mount, so a file handle taken under
// an earlier mount (name_to_handle_at, an NFS client's, kept across a server restart) names an ID
// that the new mount may have given to another file: decoded, it opened that file. The kernel
// refuses a handle whose generation differs from its inode's, so each mount gives all its nodes
// one random generation of its own, and an old handle is stale (ESTALE) instead of wrong. (Handles
// that survive a remount would need node IDs kept across mounts: docs/POSIX.md.)
#pragma once

#include <cstdint>

namespace gcfs::mount {

// Random, never 0 (the root's, which the kernel makes itself), the same for the process's life.
std::uint64_t node_generation();

}  // namespace gcfs::mount
