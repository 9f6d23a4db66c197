#include "crypto/rekey_plan.h"

#include <algorithm>

#include "crypto/errors.h"
#include "crypto/hmac_sha256.h"
#include "crypto/key_ring.h"
#include "crypto/key_slot_json.h"
#include "crypto/random.h"
#include "crypto/vault_config_json.h"

namespace gcfs {
namespace {

bool same_key(const SecretBytes& a, const SecretBytes& b) {
  return a.size() == b.size() && tags_equal(a.data(), b.data(), a.size());
}

const KeySlot* find_in(const std::vector<KeySlot>& slots, int number) {
  for (const KeySlot& s : slots)
    if (s.number == number) return &s;
  return nullptr;
}

// Whether secret opens slot `s` of the old config to old_master.
void check_secret(const VaultConfig& old_config, const KeySlot& s, const KeptSlot& k, const SecretBytes& old_master) {
  SecretBytes opened;
  try {
    if (old_config.has_key_slots()) {
      auto m = open_key_slot(s, k.secret, fixed_fields(old_config));
      if (!m) throw WrongPassword("");
      opened = std::move(*m);
    } else {
      opened = old_config.unlock(k.secret, KdfPolicy::AllowExpensive, KeySlotKind::Password);
    }
  } catch (const WrongPassword&) {
    throw WrongPassword("the " + std::string(key_slot_kind_words(s.kind)) + " given for key slot " +
                        std::to_string(s.number) + " does not open it; nothing was changed");
  }
  if (!same_key(opened, old_master))
    throw CorruptData("key slot " + std::to_string(s.number) +
                      " opens to a key other than the vault's master key: the config was edited");
}

}  // namespace

std::vector<KeySlot> rekey_source_slots(const VaultConfig& old_config) {
  if (old_config.has_key_slots()) return old_config.slots;
  KeySlot only;
  only.number = 0;
  only.kind = KeySlotKind::Password;
  only.scrypt = old_config.scrypt;
  return {only};
}

RekeyPlan make_rekey_plan(const VaultConfig& old_config, const SecretBytes& old_master,
                          const std::vector<KeptSlot>& kept) {
  if (kept.empty()) throw UserError("a re-key must keep at least one key slot, or nothing would open the vault");
  const std::vector<KeySlot> source = rekey_source_slots(old_config);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (kept[j].number == kept[i].number)
        throw UserError("key slot " + std::to_string(kept[i].number) + " is named twice");
    const KeySlot* s = find_in(source, kept[i].number);
    if (!s) throw UserError("there is no key slot " + std::to_string(kept[i].number) + " to keep");
    if (s->kind != kept[i].kind)
      throw UserError("key slot " + std::to_string(s->number) + " is a " + std::string(key_slot_kind_words(s->kind)) +
                      " slot, and was given a " + std::string(key_slot_kind_words(kept[i].kind)));
  }
  // Every secret is checked before the first new wrap: a wrong one refuses the whole re-key.
  for (const KeptSlot& k : kept)
    if (!k.verified) check_secret(old_config, *find_in(source, k.number), k, old_master);

  RekeyPlan plan;
  plan.new_master = SecretBytes(kMasterKeyBytes);
  random_bytes(plan.new_master);
  VaultConfig& c = plan.new_config;
  c = old_config;
  c.config_version = kConfigVersionKeySlots;
  c.salt.clear();
  c.wrapped_key.clear();
  c.key_nonce = {};
  c.key_tag = {};
  c.slots.clear();
  const nlohmann::json bound = fixed_fields(c);
  for (const KeptSlot& k : kept) {
    KeySlot s = *find_in(source, k.number);
    seal_key_slot(s, plan.new_master, k.secret, bound);
    c.slots.push_back(std::move(s));
  }
  std::sort(c.slots.begin(), c.slots.end(), [](const KeySlot& a, const KeySlot& b) { return a.number < b.number; });
  c.seal(plan.new_master);
  return plan;
}

}  // namespace gcfs
