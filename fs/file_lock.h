// flock() for a daemon that is starting: a lock another gpucryptfs still holds is waited for a
// moment, because the holder is most often the daemon of a mount that was just unmounted and is
// still tearing down ('fusermount3 -u DIR && gpucryptfs mount ... DIR' in a script). A lock held
// longer than the grace period is a real second user, and the caller says so.
#pragma once

#include <chrono>

namespace gcfs {

inline constexpr std::chrono::milliseconds kLockGrace{5000};

// flock(fd, operation | LOCK_NB), retried until it succeeds or `grace` has passed. Returns 0, or
// the errno of the last attempt (EWOULDBLOCK: still held by someone else).
int flock_with_grace(int fd, int operation, std::chrono::milliseconds grace = kLockGrace);

}  // namespace gcfs
