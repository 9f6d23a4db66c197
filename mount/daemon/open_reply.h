// Answers an open with the kernel's open flags that libfuse 3.14 cannot express, and chooses
// which opens bypass the page cache.
#pragma once

#include "mount/fuse_api.h"

namespace gcfs::mount {

// The FUSE protocol version (7.39, Linux 6.6) from which a write through a direct-I/O handle
// drops the range from the page cache that other handles of the file read through. Before it,
// a reader holding the file open could go on reading its old cached pages after such a write.
constexpr unsigned kCoherentDirectWritesMinor = 39;

// Sets fi->direct_io for the opens whose reads and writes bypass the kernel's page cache:
// - the caller's O_DIRECT;
// - where direct_writes, a write-only open. Without the writeback cache every write() is already
//   a WRITE request to the daemon, and every open drops the file's cached pages (keep_cache off),
//   so the page-cache copy that a cached write makes first only costs: the writer's CPU copies
//   each byte into a page the kernel must allocate, the daemon copies it again out of that page.
//   Direct, the daemon's copy reads the writer's own buffer. Measured: one stream 1.2x to 1.7x
//   faster on the development VM and the H100 machine, 4 writers on the VM 1.0x to 1.4x
//   (docs/BENCHMARKS.md, "write-only opens with direct I/O"). A write-only handle cannot read or
//   map the file, so nothing else about it changes.
void choose_direct_io(fuse_file_info* fi, bool direct_writes);

// Like fuse_reply_open. A direct-I/O open also gets parallel direct writes
// (FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES): without both, the kernel takes the inode lock
// exclusively around every direct write to the file, so writers of one file (a database, a VM
// image) wait for each other's round trip through the daemon, and random writes do not grow with
// threads at all. Writes that extend the file stay exclusive in the kernel. ContentFile already
// serializes overlapping writes per chunk. libfuse 3.14's fuse_file_info has no bit for the
// parallel flag, so the reply is built here (fuse_open_out is 16 bytes in every protocol version;
// kernels before 7.36 ignore the flag).
int reply_open(fuse_req_t req, fuse_file_info* fi);

}  // namespace gcfs::mount
