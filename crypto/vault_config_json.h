// The config's field groups as JSON (crypto/ only: the JSON type stays out of the public headers).
#pragma once

#include <nlohmann/json.hpp>

#include "crypto/vault_config.h"

namespace gcfs {

// The fields that decide how the vault is read and never change after init (format, version,
// config_version, kind, cipher, chunk_size, features): what every key slot's wrap is bound to.
nlohmann::json fixed_fields(const VaultConfig& c);
// Every field but the key material: for version 1 the wrap's associated data (with "kdf"), for
// version 2 what the digest authenticates (with a volume's "volume_size").
nlohmann::json public_fields(const VaultConfig& c);

// unlock() of a config with key slots (vault_config_slots.cc).
SecretBytes unlock_slots(const VaultConfig& c, std::string_view secret, KeySlotKind kind, int* opened_slot);

}  // namespace gcfs
