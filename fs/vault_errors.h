// The exceptions of the fs layer, beside each other, so that code that only throws or catches one
// (the config reader, the CLI) need not include the Vault class.
#pragma once

#include "crypto/errors.h"

namespace gcfs {

// CIPHERDIR has no gpucryptfs.conf (or is not there at all).
struct NotAVault : UserError {
  using UserError::UserError;
};

}  // namespace gcfs
