// A re-key's plan: a new random master key and the config that holds it (docs/FORMAT.md,
// "Re-keying"). Every key slot that is kept wraps the new key under its own secret, at its own
// number, kind and scrypt cost; the digest is made under the new key. Nothing here knows whether
// the vault is a directory or a volume: the directory walk (fs/rekey/) and the volume's re-key
// both start from it.
//
// A config of version 1 (one password wrap) becomes version 2, its password slot 0: a re-key
// writes a new config anyway, and key slots are what every new config has.
#pragma once

#include <string_view>
#include <vector>

#include "crypto/key_slot.h"
#include "crypto/secret.h"
#include "crypto/vault_config.h"

namespace gcfs {

// One slot of the old config that the new one keeps, with the secret that opens it. A config of
// version 1 has one "slot": number 0, a password.
struct KeptSlot {
  int number = 0;
  KeySlotKind kind = KeySlotKind::Password;
  std::string_view secret;
  // The secret was checked against this slot already (the one that unlocked the vault): no
  // scrypt is spent checking it again.
  bool verified = false;
};

struct RekeyPlan {
  SecretBytes new_master;
  VaultConfig new_config;
};

// The numbers, kinds and costs of the old config's ways in: its slots, or slot 0 for version 1.
std::vector<KeySlot> rekey_source_slots(const VaultConfig& old_config);

// Makes the new master key and config. Each kept slot's secret is first checked to open that
// slot of old_config (WrongPassword naming the slot otherwise: a mistyped secret must never
// become the only way into a slot), then sealed anew with a fresh salt. Throws UserError for an
// empty kept list, a slot named twice or one the config does not have; CorruptData when a slot
// opens to a key other than old_master.
RekeyPlan make_rekey_plan(const VaultConfig& old_config, const SecretBytes& old_master,
                          const std::vector<KeptSlot>& kept);

}  // namespace gcfs
