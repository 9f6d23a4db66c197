// FUSE_TMPFILE, declared here because Debian 12's kernel headers (linux/fuse.h of 6.1, protocol
// 7.36) predate it and libfuse 3.14's request table ends before it. From the uapi header
// linux/fuse.h of Linux 6.1 and later (protocol 7.37: "add FUSE_TMPFILE"): opcode 51, whose
// request is that of FUSE_CREATE (struct fuse_create_in, then the name, which the kernel's
// fs/fuse/dir.c fuse_create_open sends for both) and whose reply is too (struct fuse_entry_out,
// then struct fuse_open_out). The kernel answers open(O_TMPFILE) with EOPNOTSUPP for the rest of
// the mount's life once a daemon replied ENOSYS to it.
#pragma once

#include <cstdint>

namespace gcfs::mount::tmpfile_abi {

inline constexpr std::uint32_t kFuseTmpfile = 51;  // FUSE_TMPFILE (enum fuse_opcode)

}  // namespace gcfs::mount::tmpfile_abi
