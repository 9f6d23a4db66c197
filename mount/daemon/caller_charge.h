// Space a root daemon allocates for a caller is charged as that caller's own writes would be:
// under --allow-other a root daemon writing with root's credentials spent root's reserved blocks
// for any user (an ordinary user's fallocate through the mount filled an ext4 with 50% reserved
// to 100%, after which his own writes elsewhere got nothing) and would pass quota limits.
//
// How: ext4 (and the other local filesystems) let a write use the reserved blocks when the
// writer's filesystem uid is the reserving one (root) or it holds CAP_SYS_RESOURCE, which also
// lets it pass quota hard limits. So a request thread that serves an allocating request of a
// non-root caller takes that caller's filesystem uid and gid and drops CAP_SYS_RESOURCE from its
// effective set, keeping every other capability it has (the daemon still reaches every backing
// folder, keeps setid bits on what it writes, gives entries away). The switch is per thread
// (setfsuid and capset change only the calling thread) and costs a few microseconds, so a thread
// keeps the last caller's charge until a request of another caller needs a different one: a
// mount used by one user pays it once per serving thread.
//
// Off where it would do harm or nothing: a daemon that is not root (it is charged as itself
// already), and CIPHERDIR on a network filesystem or another FUSE filesystem, whose server sees
// the filesystem uid of each call and would check it against folders the daemon owns (the server
// enforces its own quotas there).
#pragma once

#include <sys/types.h>

#include <string>

namespace gcfs::mount {

// Decides once, for the daemon's whole life, from its credentials and the filesystem that holds
// cipherdir_fd. Returns what the log says: "" when charging is on, else why it is off.
std::string enable_caller_charging(int cipherdir_fd);

// Whether a FUSE opcode may allocate space in CIPHERDIR (a write, fallocate, a new entry, a
// rename, an extended attribute, a copy, a truncate).
bool opcode_allocates(unsigned opcode);

// The filesystem uid and gid one serving thread works with now, and the switch to another
// caller's. setfsuid and capset change only the calling thread, so each serving thread owns one
// CallerCharge (its transport keeps it beside the thread's requests: mount/transport/
// request_channel.h) and only that thread uses it. It remembers the thread's charge so that a
// thread serving one caller after another of the same pays the switch once.
class CallerCharge {
 public:
  // Makes the calling thread's filesystem work count as uid:gid's (root's again for uid 0). Cheap
  // when the thread already has that charge; does nothing while charging is off.
  void charge_to(uid_t uid, gid_t gid);

 private:
  // Unknown until the thread's first switch: a thread inherits the credentials of the one that
  // started it, which may hold a caller's.
  bool known_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

}  // namespace gcfs::mount
