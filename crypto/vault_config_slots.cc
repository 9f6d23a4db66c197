// The key slots of a config of version 2 (crypto/key_slot.h): opening, adding, removing, and the
// digest that binds the config's fields to the master key.
//
// Why a digest as well as each slot's wrap: a slot proves only that whoever wrote it had a
// secret; the digest (HMAC-SHA256 under a key derived from the master key, as LUKS2 keeps a
// digest of its volume key) proves that the fields were written by someone holding the master
// key. So a slot planted by someone without it opens nothing that unlock() accepts, a field that
// changes after init (a volume's size) needs no slot's secret to change, and a slot that opens to
// a key the digest refuses is reported as an edited config instead of mounting garbage.
#include <algorithm>

#include "crypto/errors.h"
#include "crypto/hmac_sha256.h"
#include "crypto/key_slot_json.h"
#include "crypto/vault_config.h"
#include "crypto/vault_config_json.h"

namespace gcfs {
namespace {

constexpr std::string_view kDigestInfo = "gpucryptfs v2 config digest HMAC-SHA256";

HmacSha256Digest compute_digest(const VaultConfig& c, const SecretBytes& master) {
  const SecretBytes key = hkdf_sha256(master, {}, {reinterpret_cast<const std::uint8_t*>(kDigestInfo.data()), kDigestInfo.size()},
                                      kHmacSha256Bytes);
  const std::string fields = c.authenticated_fields();
  return hmac_sha256(key, {{reinterpret_cast<const std::uint8_t*>(fields.data()), fields.size()}});
}

void require_key_slots(const VaultConfig& c, const char* what) {
  if (!c.has_key_slots()) throw std::logic_error(std::string(what) + " on a config without key slots");
}

KeySlot& slot_or_throw(VaultConfig& c, int number) {
  for (KeySlot& s : c.slots)
    if (s.number == number) return s;
  throw UserError("there is no key slot " + std::to_string(number) + " ('gpucryptfs keyslot list' shows the slots)");
}

}  // namespace

std::string VaultConfig::authenticated_fields() const { return public_fields(*this).dump(); }

SecretBytes unlock_slots(const VaultConfig& c, std::string_view secret, KeySlotKind kind, int* opened_slot) {
  const nlohmann::json bound = fixed_fields(c);
  std::size_t tried = 0;
  for (const KeySlot& s : c.slots) {
    if (s.kind != kind) continue;
    ++tried;
    std::optional<SecretBytes> master = open_key_slot(s, secret, bound);
    if (!master) continue;
    if (!c.master_key_matches(*master))
      throw CorruptData("key slot " + std::to_string(s.number) + " opened, but the config's digest does not match "
                        "the key it holds: the config's fields or that slot were edited by someone without the "
                        "master key, and it is not used");
    if (opened_slot) *opened_slot = s.number;
    return std::move(*master);
  }
  const std::string words(key_slot_kind_words(kind));
  if (tried == 0)
    throw WrongPassword("the config has no " + words + " slot (" + std::to_string(c.slots.size()) +
                        " slot" + (c.slots.size() == 1 ? "" : "s") + " of another kind): unlock with " +
                        (kind == KeySlotKind::KeyFile ? "a password" : "--keyfile"));
  throw WrongPassword("wrong " + words + ": it opens none of the config's " + std::to_string(tried) + " " + words +
                      " slot" + (tried == 1 ? "" : "s") +
                      " (or their fields were edited: their authentication failed)");
}

bool VaultConfig::master_key_matches(const SecretBytes& master) const {
  if (!has_key_slots()) return true;
  const HmacSha256Digest d = compute_digest(*this, master);
  return tags_equal(d.data(), digest.data(), d.size());
}

void VaultConfig::seal(const SecretBytes& master) {
  require_key_slots(*this, "seal");
  const HmacSha256Digest d = compute_digest(*this, master);
  std::copy(d.begin(), d.end(), digest.begin());
}

const KeySlot* VaultConfig::find_slot(int number) const {
  for (const KeySlot& s : slots)
    if (s.number == number) return &s;
  return nullptr;
}

int VaultConfig::add_slot(const SecretBytes& master, std::string_view secret, KeySlotKind kind, const ScryptParams& cost) {
  require_key_slots(*this, "add_slot");
  if (slots.size() >= static_cast<std::size_t>(kMaxKeySlots))
    throw UserError("the config has " + std::to_string(kMaxKeySlots) + " key slots, the most it can hold: remove one first");
  int number = 0;
  while (find_slot(number)) ++number;
  KeySlot s;
  s.number = number;
  s.kind = kind;
  s.scrypt = cost;
  seal_key_slot(s, master, secret, fixed_fields(*this));
  slots.insert(std::upper_bound(slots.begin(), slots.end(), number,
                                [](int n, const KeySlot& o) { return n < o.number; }),
               std::move(s));
  seal(master);
  return number;
}

void VaultConfig::remove_slot(int number) {
  require_key_slots(*this, "remove_slot");
  slot_or_throw(*this, number);
  if (slots.size() == 1)
    throw UserError("key slot " + std::to_string(number) + " is the last one: without it nothing but the master key "
                    "would open the vault; add another slot first");
  slots.erase(std::remove_if(slots.begin(), slots.end(), [&](const KeySlot& s) { return s.number == number; }),
              slots.end());
}

void VaultConfig::rewrap_slot(int number, const SecretBytes& master, std::string_view secret, KeySlotKind kind) {
  require_key_slots(*this, "rewrap_slot");
  KeySlot& s = slot_or_throw(*this, number);
  s.kind = kind;
  seal_key_slot(s, master, secret, fixed_fields(*this));
  seal(master);
}

void VaultConfig::upgrade_to_key_slots(const SecretBytes& master, std::string_view password) {
  if (has_key_slots()) return;
  const ScryptParams cost = scrypt;
  config_version = kConfigVersionKeySlots;
  salt.clear();
  wrapped_key.clear();
  key_nonce = {};
  key_tag = {};
  slots.clear();
  add_slot(master, password, KeySlotKind::Password, cost);
}

}  // namespace gcfs
