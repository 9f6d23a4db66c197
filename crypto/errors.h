// Exceptions whose message is written for the person running gpucryptfs: it names what is wrong
// and, where there is one, what to do about it. The CLI prints what() and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace gcfs {

struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The password did not open the config's key (or the config was edited: GCM cannot tell which).
struct WrongPassword : UserError {
  using UserError::UserError;
};

// A file that gpucryptfs wrote is not in the shape it should be.
struct CorruptData : UserError {
  using UserError::UserError;
};

// Another live gpucryptfs process holds the vault's (or container's) write lock: a second
// read-write mount would write the same files with a cache and a journal of its own.
struct VaultInUse : UserError {
  using UserError::UserError;
};

}  // namespace gcfs
