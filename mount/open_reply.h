// Answers an open with the kernel's open flags that libfuse 3.14 cannot express.
#pragma once

#include "mount/fuse_api.h"

namespace gcfs::mount {

// Like fuse_reply_open. A caller that opened with O_DIRECT gets direct I/O with parallel direct
// writes (FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES): without both, the kernel takes the
// inode lock exclusively around every O_DIRECT write to the file, so writers of one file (a
// database, a VM image) wait for each other's round trip through the daemon, and random writes
// do not grow with threads at all. Writes that extend the file stay exclusive in the kernel.
// ContentFile already serializes overlapping writes per chunk. libfuse 3.14's fuse_file_info has
// no bit for the parallel flag, so the reply is built here (fuse_open_out is 16 bytes in every
// protocol version; kernels before 7.36 ignore the flag).
int reply_open(fuse_req_t req, fuse_file_info* fi);

}  // namespace gcfs::mount
