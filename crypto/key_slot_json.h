// A key slot's JSON and its wrap (crypto/ only: the JSON type stays out of the public headers).
//
// A slot's wrap is bound (GCM associated data) to its own number, type and KDF fields and to the
// config's fixed fields (`bound`: everything that decides how the vault is read and never changes
// after init), so no field can be edited, and no slot moved to another number or another vault,
// without its wrap failing. The fields that do change (a volume's size) are bound to the master
// key by the config's digest instead (vault_config_slots.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "crypto/key_slot.h"
#include "crypto/secret.h"

namespace gcfs {

nlohmann::json key_slot_to_json(const KeySlot& slot);
// Throws CorruptData naming the field that is wrong.
KeySlot key_slot_from_json(const nlohmann::json& j);

// Wraps master under secret with a fresh salt and nonce, keeping the slot's number, kind and cost.
void seal_key_slot(KeySlot& slot, const SecretBytes& master, std::string_view secret, const nlohmann::json& bound);
// The master key when the slot opens with secret; nullopt when it does not.
std::optional<SecretBytes> open_key_slot(const KeySlot& slot, std::string_view secret, const nlohmann::json& bound);

}  // namespace gcfs
