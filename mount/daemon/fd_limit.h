// The directory daemon works relative to descriptors (the passthrough_hp design: operations are
// immune to renames). It holds one or two per open file, and two bounded caches of O_PATH
// descriptors, of directories and of other files, sized from the soft limit (see
// mount/daemon/inode_table.h): the higher the limit, the fewer are opened again by name. The caches are
// bounded because under --allow-other any user decides how many inodes the kernel remembers: one
// who makes a million directories must not run the daemon out of descriptors for everyone.
#pragma once

#include <sys/resource.h>

#include <cstddef>

namespace gcfs::mount {

struct DescriptorBudget {
  std::size_t dirs;   // cached directory descriptors
  std::size_t files;  // cached descriptors of other files
};

// Each cache gets a quarter of the descriptors available (the soft limit less those already open),
// at least 8; directories at most 65536, other files at most 8192. Half of what is available or
// more stays for open files and the calls under way.
DescriptorBudget descriptor_budget(rlim_t available);

// How many descriptors this process has open now (/proc/self/fd), 0 when that cannot be read.
std::size_t descriptors_in_use();

// Raises the soft RLIMIT_NOFILE to the hard limit and, where the process may (root), the hard
// limit to the kernel's fs.nr_open. Returns the soft limit now in force.
rlim_t raise_open_file_limit();

}  // namespace gcfs::mount
