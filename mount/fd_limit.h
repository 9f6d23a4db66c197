// The directory daemon holds one O_PATH descriptor for every inode the kernel remembers (the
// passthrough_hp design: operations work relative to descriptors, immune to renames), so a tree of
// tens of thousands of entries, say an unpacked source tree, needs far more descriptors than the
// usual soft limit of 1024.
#pragma once

#include <sys/resource.h>

namespace gcfs::mount {

// Raises the soft RLIMIT_NOFILE to the hard limit and, where the process may (root), the hard
// limit to the kernel's fs.nr_open. Returns the soft limit now in force.
rlim_t raise_open_file_limit();

}  // namespace gcfs::mount
