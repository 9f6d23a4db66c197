// How info, volume info and keyslot list show a config's key slots: number, kind and scrypt cost,
// never a salt or a wrap. Read before any password, so nothing shown is authenticated yet.
#pragma once

#include <ostream>
#include <string>

#include "crypto/vault_config.h"

namespace gcfs::cli {

// "Keys:" (the config version and the slot count), one line per slot ("Key slot 0:   password,
// scrypt N=2^17 r=8 p=1") or, for a config of version 1, "Key from:" with its one cost; then a
// "Warning:" line for each cost that unlocking refuses without --allow-expensive-kdf.
void print_key_slots(std::ostream& out, const VaultConfig& c);
// "scrypt N=2^17 r=8 p=1".
std::string scrypt_cost_text(const ScryptParams& p);

}  // namespace gcfs::cli
