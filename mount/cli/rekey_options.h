// What `rekey` and `volume rekey` share: the secrets of the key slots a re-key keeps. A slot
// wraps the master key under a key from its own secret, so re-wrapping slot N needs slot N's
// secret (as `cryptsetup reencrypt` asks for every keyslot's passphrase). The unlock options open
// the vault and give the slot that opened; every other slot is either given its secret
// (--slot-passfile N=FILE, --slot-keyfile N=FILE, or asked for on a terminal, naming the slot and
// its kind) or dropped (--drop-slot N, --keep-only-unlocking-slot). With neither, the re-key is
// refused before anything changes, naming the slots.
#pragma once

#include <boost/program_options.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "crypto/rekey_plan.h"
#include "crypto/vault_config.h"
#include "mount/cli/password.h"

namespace gcfs::cli {

struct RekeySlotArgs {
  std::vector<std::string> slot_passfiles;  // "N=FILE"
  std::vector<std::string> slot_keyfiles;   // "N=FILE"
  std::vector<int> drop_slots;
  bool keep_only_unlocking_slot = false;
};

void add_rekey_slot_options(boost::program_options::options_description& opts, RekeySlotArgs* a);

// The secrets of the kept slots, owned (wiped when dropped), and the plan's view of them.
class KeptSlotSecrets {
 public:
  std::vector<KeptSlot> kept() const;
  std::vector<int> dropped;  // slot numbers the new config does not have
  struct Entry {
    int number;
    KeySlotKind kind;
    SecretString secret;
    bool verified;
  };
  std::vector<Entry> entries;
};

// "3=/path" -> (3, "/path"); a usage error (boost's po::error) otherwise.
std::pair<int, std::string> parse_slot_file_arg(const std::string& arg, const char* option);

// Gathers every slot's secret: the unlocking one's (given; -1 for a config of version 1 means its
// one password, slot 0), files named for the others, a prompt on the terminal for the rest
// (`interactive`: standard input is a terminal), else UserError naming every slot without a
// secret and the options that give or drop one. Throws a usage error for a file or --drop-slot
// naming a slot the config does not have or the unlocking slot.
KeptSlotSecrets gather_kept_slot_secrets(const RekeySlotArgs& a, const VaultConfig& cfg, int opened_slot,
                                         const UnlockSecret& unlocking, bool interactive);

}  // namespace gcfs::cli
