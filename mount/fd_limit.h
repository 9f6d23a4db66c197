// The directory daemon holds one O_PATH descriptor for every directory the kernel remembers (the
// passthrough_hp design: operations work relative to descriptors, immune to renames), one or two
// per open file, and a cache of descriptors of other files sized from the soft limit (a quarter of
// it, see mount/inode_table.h), so the higher the limit, the fewer files are opened again by name.
#pragma once

#include <sys/resource.h>

namespace gcfs::mount {

// Raises the soft RLIMIT_NOFILE to the hard limit and, where the process may (root), the hard
// limit to the kernel's fs.nr_open. Returns the soft limit now in force.
rlim_t raise_open_file_limit();

}  // namespace gcfs::mount
