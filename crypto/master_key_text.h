// The master key as `init` prints it for paper: 64 hex digits in eight groups of eight, joined by
// dashes ("6f3a09c1-..."), and the same text read back (mount --masterkey, passwd --masterkey).
// Both sides keep the key and its text in secret memory (crypto/secret.h), never in a std::string.
#pragma once

#include "crypto/secret.h"

namespace gcfs {

SecretString format_master_key(const SecretBytes& key);

// Hex digits in either case; dashes, spaces and tabs between them are ignored, so the key may be
// typed as printed or in one run. Throws UserError saying what is wrong (a character that is not
// a hex digit, or not 64 digits), never quoting the text itself.
SecretBytes parse_master_key(const SecretString& text);

}  // namespace gcfs
