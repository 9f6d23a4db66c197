// The directory daemon works relative to descriptors (the passthrough_hp design: operations are
// immune to renames). It holds one or two per open file, and two bounded caches of O_PATH
// descriptors, of directories and of other files, sized from the soft limit (see
// mount/inode_table.h): the higher the limit, the fewer are opened again by name. The caches are
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

// Each cache gets a quarter of the soft limit, at least 16; directories at most 65536, other files
// at most 8192. Half of the limit or more stays for open files and the calls under way.
DescriptorBudget descriptor_budget(rlim_t soft_limit);

// Raises the soft RLIMIT_NOFILE to the hard limit and, where the process may (root), the hard
// limit to the kernel's fs.nr_open. Returns the soft limit now in force.
rlim_t raise_open_file_limit();

}  // namespace gcfs::mount
