// Under --allow-other a daemon running as root gives each user the files and directories they make
// (so the kernel's permission checks see the right owners), in CIPHERDIR too. Whoever can reach
// CIPHERDIR can then work on their part of it directly, behind the daemon's back (plant FIFOs or
// links, swap entries), and whoever can write to or owns a folder on the way can replace CIPHERDIR
// itself. The mount warns when that is so.
#pragma once

#include <sys/types.h>

#include <string>

namespace gcfs::mount {

// Why users other than `owner` (and root) can reach or replace the absolute path cipherdir: the
// first problem found from / downwards, in words naming the folder; "" when they cannot.
// Reachable (a problem only for a daemon run by root, owner 0, which gives entries away): every
// folder above it and CIPHERDIR itself searchable by group or others.
// Replaceable: a folder on the way (or CIPHERDIR) writable by group or others (a sticky folder
// above CIPHERDIR, like /tmp, is fine) or owned by another user.
std::string cipherdir_exposure(const std::string& cipherdir, uid_t owner);

}  // namespace gcfs::mount
