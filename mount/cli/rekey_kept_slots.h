// Which key slots a re-key keeps, and their secrets. A slot wraps the master key under a key that
// only its own secret derives, so a slot can move to the new master key only if its secret is at
// hand: the one that unlocked, those given with --slot-passfile / --slot-keyfile, those typed on a
// terminal; the rest are removed only when --drop-other-slots says so (as cryptsetup reencrypt
// keeps only the keyslots whose passphrases it was given).
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <utility>
#include <vector>

#include "crypto/kdf.h"
#include "crypto/vault_config.h"
#include "mount/cli/password.h"

namespace gcfs::cli {

struct RekeySlotArgs {
  std::vector<std::string> slot_passfiles;  // "N=FILE"
  std::vector<std::string> slot_keyfiles;   // "N=FILE"
  bool drop_others = false;
};

void add_rekey_slot_options(boost::program_options::options_description& opts, RekeySlotArgs* args);

struct KeptSlots {
  std::vector<std::pair<int, UnlockSecret>> secrets;  // slot number (-1: a version 1 config's password)
  std::vector<int> dropped;
};

// Checks every secret against its slot (one scrypt each) before anything changes: a secret that
// does not open its slot is WrongPassword (exit 12), a slot left without secret or drop is a
// UserError naming the options. master: what `opened` unlocked.
KeptSlots gather_kept_slots(const VaultConfig& config, int opened_slot, UnlockSecret opened, const SecretBytes& master,
                            const RekeySlotArgs& args, KdfPolicy policy);

// config with every kept slot wrapping new_master (fresh salts, each slot's cost kept), the
// dropped ones removed, and the digest made under new_master. One scrypt per kept slot.
VaultConfig rekeyed_config(const VaultConfig& config, const KeptSlots& kept, const SecretBytes& new_master);

}  // namespace gcfs::cli
