// Open replies with the flags libfuse 3.14 cannot express, and which opens bypass the page cache
// (open_reply.h).
#include "mount/daemon/open_reply.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/uio.h>

namespace gcfs::mount {

void choose_direct_io(fuse_file_info* fi, bool direct_writes) {
  if ((fi->flags & O_DIRECT) || (direct_writes && (fi->flags & O_ACCMODE) == O_WRONLY)) fi->direct_io = 1;
}

int reply_open(fuse_req_t req, fuse_file_info* fi) {
  if (!fi->direct_io) return fuse_reply_open(req, fi);
  // What libfuse's fill_open does, plus the flag it does not know.
  fuse_open_out out{};
  out.fh = fi->fh;
  out.open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES;
  if (fi->keep_cache) out.open_flags |= FOPEN_KEEP_CACHE;
  if (fi->nonseekable) out.open_flags |= FOPEN_NONSEEKABLE;
  if (fi->noflush) out.open_flags |= FOPEN_NOFLUSH;
  iovec iov{&out, sizeof out};
  return fuse_reply_iov(req, &iov, 1);
}

}  // namespace gcfs::mount
