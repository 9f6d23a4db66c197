// What every gpucryptfs process does first, before it reads a password or a key: it makes itself
// non-dumpable, so no core dump writes keys or plaintext to disk and no other process of the same
// user can attach a debugger or read its memory through /proc (the daemon stays so after it
// detaches: the flag survives fork).
#pragma once

namespace gcfs::cli {

// Best effort: returns false (and changes nothing else) where the system refuses.
bool harden_process();

}  // namespace gcfs::cli
