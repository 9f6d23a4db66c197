// gpucryptfs keyslot list|add|remove: the key slots of a directory vault's config (docs/USAGE.md,
// "Key slots"). Only gpucryptfs.conf is rewritten (atomically: fs/config_file.h); the master key,
// and so every file, stays as it is.
#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

#include "crypto/errors.h"
#include "fs/rekey/rekey_record_file.h"
#include "fs/vault.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/config_option.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/keyslot_options.h"
#include "mount/cli/master_key_option.h"
#include "mount/cli/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

const char* const kUsage =
    "usage: gpucryptfs keyslot list [--config FILE] CIPHERDIR\n"
    "       gpucryptfs keyslot add [UNLOCK] [--new-passfile F | --new-keyfile F] [--scrypt-logn N] CIPHERDIR\n"
    "       gpucryptfs keyslot remove --slot N [UNLOCK] CIPHERDIR\n"
    "UNLOCK: --passfile F, --extpass CMD, --keyfile F or --masterkey [--masterkey-file F] (else the password is\n"
    "asked for), and --config FILE for a config kept outside CIPHERDIR.\n\n"
    "Each key slot is one way into the vault: a password or a key file, each wrapping the same master key.\n"
    "A vault made before key slots (config version 1) is upgraded by its first 'keyslot add'.\n";

// Each subcommand's --help: its own usage line, so that it lists what that subcommand takes.
std::string verb_usage(KeySlotVerb verb) {
  switch (verb) {
    case KeySlotVerb::List:
      return "usage: gpucryptfs keyslot list [--config FILE] CIPHERDIR\n\n"
             "Lists the key slots of the vault in CIPHERDIR: number, kind (password, key file) and scrypt cost.\n"
             "No password needed; no secret is shown.\n\noptions";
    case KeySlotVerb::Add:
      return "usage: gpucryptfs keyslot add [UNLOCK] [--new-passfile F | --new-keyfile F] [--scrypt-logn N] CIPHERDIR\n\n"
             "Unlocks the vault with any key slot (UNLOCK: --passfile, --extpass, --keyfile or --masterkey) and adds\n"
             "one that wraps the same master key. A config of version 1 is upgraded first.\n\noptions";
    case KeySlotVerb::Remove:
      break;
  }
  return "usage: gpucryptfs keyslot remove --slot N [UNLOCK] CIPHERDIR\n\n"
         "Unlocks the vault with any key slot (UNLOCK: --passfile, --extpass, --keyfile or --masterkey) and removes\n"
         "slot N. The last slot is never removed.\n\noptions";
}

struct Unlocked {
  SecretBytes master;
  int slot = -1;
  KeySlotKind kind = KeySlotKind::Password;
  SecretString password;  // kept for a version 1 config's upgrade, which wraps it again as slot 0
};

Unlocked unlock_for_edit(const VaultConfig& cfg, const KeySlotArgs& a, const MasterKeyOptions& mk) {
  Unlocked u;
  if (mk.given()) {
    if (!cfg.has_key_slots())
      throw UserError("a config of version 1 is upgraded to key slots with its password, so that the password stays "
                      "a way in: unlock with it instead of --masterkey (or write a new config with 'gpucryptfs "
                      "passwd --masterkey' first)");
    u.master = read_master_key(mk);
    if (!cfg.master_key_matches(u.master))
      throw CodedError(kExitBadMasterKey, "the master key does not match the config's digest (a mistyped key, another "
                                          "vault's, or an edited config)");
    std::cout << "Unlocked with the master key.\n";
    return u;
  }
  UnlockSecret secret = read_unlock_secret(a.unlock, "Password: ");
  u.master = cfg.unlock(secret.text.view(), kdf_policy(a.allow_expensive_kdf), secret.kind, &u.slot);
  u.kind = secret.kind;
  if (!cfg.has_key_slots()) u.password = std::move(secret.text);
  std::cout << unlocked_line(u.slot, u.kind) << "\n";
  return u;
}

int keyslot_add(VaultConfig cfg, const ConfigPlace& place, const KeySlotArgs& a, const MasterKeyOptions& mk) {
  // A new secret from a file is read first: a missing or empty one then costs no typed password.
  std::optional<UnlockSecret> fresh;
  if (a.fresh.given()) fresh = read_unlock_secret(a.fresh, "New password: ", true);
  const Unlocked u = unlock_for_edit(cfg, a, mk);
  const ScryptParams cost = new_slot_cost(a, cfg, u.slot);
  const bool upgrade = !cfg.has_key_slots();
  if (upgrade) cfg.upgrade_to_key_slots(u.master, u.password.view());
  if (!fresh) fresh = read_unlock_secret(a.fresh, "New password: ", true);
  const int number = cfg.add_slot(u.master, fresh->text.view(), fresh->kind, cost);
  fresh.reset();  // the new secret is wiped here, or on the way out
  save_vault_config(place, cfg);
  if (upgrade)
    std::cout << "Upgraded " << place.path() << " to config version 2: its password is key slot 0.\n";
  const KeySlot* s = cfg.find_slot(number);
  std::cout << "Added key slot " << number << " (a " << key_slot_kind_words(s->kind) << ", scrypt N=2^" << s->scrypt.log_n
            << "); the vault has " << cfg.slots.size() << " key slots.\n";
  return kExitOk;
}

int keyslot_remove(VaultConfig cfg, const ConfigPlace& place, const KeySlotArgs& a, const MasterKeyOptions& mk) {
  if (!cfg.has_key_slots())
    throw UserError(place.path() + " is a config of version 1: one password and no key slots to remove");
  if (!cfg.find_slot(a.slot))
    throw UserError("there is no key slot " + std::to_string(a.slot) + " ('gpucryptfs keyslot list' shows the slots)");
  if (cfg.slots.size() == 1)  // before any password is asked for
    throw UserError("key slot " + std::to_string(a.slot) +
                    " is the last one: without it nothing but the master key would open the vault; add another first");
  (void)unlock_for_edit(cfg, a, mk);
  cfg.remove_slot(a.slot);
  save_vault_config(place, cfg);
  std::cout << "Removed key slot " << a.slot << "; " << cfg.slots.size() << " key slot"
            << (cfg.slots.size() == 1 ? "" : "s") << " left.\n"
            << "Note: copies of the old config (backups, sync history) still open the vault with that slot's secret: "
               "the master key is the same; see docs/SECURITY.md.\n";
  return kExitOk;
}

}  // namespace

int cmd_keyslot(int argc, char** argv) {
  return run_command("keyslot", [&]() -> int {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
      (argc < 2 ? std::cerr : std::cout) << kUsage;
      return argc < 2 ? kExitUsage : kExitOk;
    }
    KeySlotArgs a;
    a.verb = parse_keyslot_verb(argv[1]);
    MasterKeyOptions mk;
    std::string cipherdir, config_option;
    po::options_description opts(verb_usage(a.verb));
    opts.add_options()("help,h", "show this help");
    add_keyslot_options(opts, a.verb, &a);
    add_config_option(opts, &config_option);
    if (a.verb != KeySlotVerb::List)
      opts.add_options()("masterkey", po::bool_switch(&mk.use),
                         "unlock with the master key that 'init' printed (from standard input or the terminal)")(
          "masterkey-file", po::value(&mk.file), "with --masterkey: read the master key from this file");
    if (!parse_command_line(argc - 1, argv + 1, opts, {{"CIPHERDIR", &cipherdir}})) return kExitOk;
    check_keyslot_args(a);
    if (!mk.file.empty()) mk.use = true;
    if (mk.use && a.unlock.given())
      throw po::error("--masterkey replaces the password: give no --passfile, --extpass or --keyfile with it");
    require_vault_directory(cipherdir, "keyslot");
    refuse_during_rekey(cipherdir, "keyslot");
    const ConfigPlace place = config_place(cipherdir, config_option);
    VaultConfig cfg = load_vault_config(place);
    if (a.verb == KeySlotVerb::List) {
      print_keyslot_list(std::cout, cfg);
      return kExitOk;
    }
    cfg.check_kdf_cost(kdf_policy(a.allow_expensive_kdf));  // before asking for a password
    if (a.verb == KeySlotVerb::Add) return keyslot_add(std::move(cfg), place, a, mk);
    return keyslot_remove(std::move(cfg), place, a, mk);
  });
}

}  // namespace gcfs::cli
