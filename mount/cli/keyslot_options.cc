#include "mount/cli/keyslot_options.h"

#include "crypto/errors.h"
#include "fs/vault.h"
#include "mount/cli/key_slot_text.h"
#include "mount/cli/cli_options.h"

namespace po = boost::program_options;

namespace gcfs::cli {

KeySlotVerb parse_keyslot_verb(const std::string& word) {
  if (word == "list") return KeySlotVerb::List;
  if (word == "add") return KeySlotVerb::Add;
  if (word == "remove") return KeySlotVerb::Remove;
  throw po::error("unknown keyslot subcommand '" + word + "': list, add or remove");
}

void add_keyslot_options(po::options_description& opts, KeySlotVerb verb, KeySlotArgs* a) {
  if (verb == KeySlotVerb::List) return;
  opts.add_options()("passfile", po::value(&a->unlock.passfile), "unlock with the password in the first line of this file")(
      "extpass", po::value(&a->unlock.extpass), "unlock with the password this command prints")(
      "keyfile", po::value(&a->unlock.keyfile), "unlock with this key file (its whole content)");
  if (verb == KeySlotVerb::Add)
    opts.add_options()("new-passfile", po::value(&a->fresh.passfile),
                       "the new slot's password: the first line of this file (else it is asked for, twice)")(
        "new-keyfile", po::value(&a->fresh.keyfile),
        "make the new slot a key file slot: this file's whole content (any bytes, 1 byte to 8 MiB) is its secret")(
        "scrypt-logn", po::value(&a->scrypt_logn),
        "the new slot's scrypt cost, N = 2^logn (10..28; default: the cost of the slot that unlocked)");
  if (verb == KeySlotVerb::Remove)
    opts.add_options()("slot", po::value(&a->slot)->required(), "the number of the slot to remove ('keyslot list' shows them)");
  add_allow_expensive_kdf_option(opts, &a->allow_expensive_kdf);
}

void check_keyslot_args(const KeySlotArgs& a) {
  require_one_secret_source(a.unlock);
  require_new_secret_source(a.fresh);
  if (a.verb == KeySlotVerb::Remove && (a.slot < 0 || a.slot >= kMaxKeySlots))
    throw po::error("--slot must be from 0 to " + std::to_string(kMaxKeySlots - 1));
  if (a.scrypt_logn != 0 && (a.scrypt_logn < kMinScryptLogN || a.scrypt_logn > kMaxScryptLogN))
    throw po::error("--scrypt-logn must be from " + std::to_string(kMinScryptLogN) + " to " + std::to_string(kMaxScryptLogN));
}

ScryptParams new_slot_cost(const KeySlotArgs& a, const VaultConfig& cfg, int opened_slot) {
  if (a.scrypt_logn != 0) return ScryptParams{a.scrypt_logn, kInitScryptR, kInitScryptP};
  if (const KeySlot* s = cfg.find_slot(opened_slot)) return s->scrypt;
  if (!cfg.has_key_slots()) return cfg.scrypt;
  return cfg.slots.empty() ? ScryptParams{} : cfg.slots.front().scrypt;  // unlocked with the master key
}

void print_keyslot_list(std::ostream& out, const VaultConfig& cfg) {
  if (!cfg.has_key_slots()) {
    out << "config version 1: one password (" << scrypt_cost_text(cfg.scrypt)
        << "), no key slots; 'gpucryptfs keyslot add' upgrades it to version 2, keeping the password as slot 0\n";
    return;
  }
  for (const KeySlot& s : cfg.slots)
    out << "slot " << s.number << ": " << key_slot_kind_words(s.kind) << ", " << scrypt_cost_text(s.scrypt) << "\n";
}

std::string unlocked_line(int opened_slot, KeySlotKind kind) {
  std::string line = unlocked_by_text(opened_slot, kind);  // what the mount's log says, as a sentence
  line[0] = 'U';
  return line + ".";
}

}  // namespace gcfs::cli
