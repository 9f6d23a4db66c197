// What `keyslot` and `volume keyslot` share: their subcommands' options (the secret that unlocks,
// the new one, the slot, the new slot's cost) and their messages.
#pragma once

#include <boost/program_options.hpp>
#include <ostream>
#include <string>

#include "crypto/vault_config.h"
#include "mount/cli/password.h"

namespace gcfs::cli {

enum class KeySlotVerb { List, Add, Remove };

struct KeySlotArgs {
  KeySlotVerb verb = KeySlotVerb::List;
  PasswordSource unlock;  // --passfile, --extpass, --keyfile
  PasswordSource fresh;   // add: --new-passfile, --new-keyfile (else the new password is asked for)
  int slot = -1;          // remove: --slot N
  int scrypt_logn = 0;    // add: the new slot's cost; 0: the cost of the slot that opened
  bool allow_expensive_kdf = false;
};

// "list", "add" or "remove"; anything else is a usage error naming the subcommands.
KeySlotVerb parse_keyslot_verb(const std::string& word);
// The options of verb (besides --help and the positional argument), into a.
void add_keyslot_options(boost::program_options::options_description& opts, KeySlotVerb verb, KeySlotArgs* a);
// The checks of the parsed options (one secret source each, --slot given for remove, the cost's range).
void check_keyslot_args(const KeySlotArgs& a);
// The new slot's cost: --scrypt-logn at r = 8, p = 1, else the opening slot's (or a version 1 config's).
ScryptParams new_slot_cost(const KeySlotArgs& a, const VaultConfig& cfg, int opened_slot);

// `keyslot list`: one line per slot, "slot 0: password, scrypt N=2^17 r=8 p=1"; a config of
// version 1 says it has none and what upgrades it.
void print_keyslot_list(std::ostream& out, const VaultConfig& cfg);
// The unlock line: "Unlocked with key slot 1 (a key file)." or the version 1 config's password.
std::string unlocked_line(int opened_slot, KeySlotKind kind);

}  // namespace gcfs::cli
