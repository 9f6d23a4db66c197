// gpucryptfs volume keyslot list|add|remove: the key slots of a volume container's header, as
// `keyslot` does for a directory vault. Both header copies are rewritten, each fsynced, so a
// removed slot opens neither (fs/volume_container.h, replace_config).
#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

#include "crypto/errors.h"
#include "fs/volume_container.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/keyslot_options.h"
#include "mount/cli/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

const char* const kVolumeUsage =
    "usage: gpucryptfs volume keyslot list CONTAINER\n"
    "       gpucryptfs volume keyslot add [UNLOCK] [--new-passfile F | --new-keyfile F] [--scrypt-logn N] CONTAINER\n"
    "       gpucryptfs volume keyslot remove --slot N [UNLOCK] CONTAINER\n"
    "UNLOCK: --passfile F, --extpass CMD or --keyfile F (else the password is asked for).\n\n"
    "Each key slot is one way into the volume: a password or a key file, each wrapping the same master key.\n"
    "The container must not be mounted. A container made before key slots is upgraded by its first 'add'.\n";

std::string verb_usage(KeySlotVerb verb) {
  switch (verb) {
    case KeySlotVerb::List:
      return "usage: gpucryptfs volume keyslot list CONTAINER\n\n"
             "Lists the key slots of the volume in CONTAINER: number, kind and scrypt cost. No password needed.\n\noptions";
    case KeySlotVerb::Add:
      return "usage: gpucryptfs volume keyslot add [UNLOCK] [--new-passfile F | --new-keyfile F] [--scrypt-logn N] "
             "CONTAINER\n\nUnlocks the volume with any key slot (UNLOCK: --passfile, --extpass or --keyfile) and adds "
             "one that wraps\nthe same master key, in both header copies. The volume must not be mounted.\n\noptions";
    case KeySlotVerb::Remove:
      break;
  }
  return "usage: gpucryptfs volume keyslot remove --slot N [UNLOCK] CONTAINER\n\n"
         "Unlocks the volume with any key slot (UNLOCK: --passfile, --extpass or --keyfile) and removes slot N\n"
         "from both header copies. The last slot is never removed. The volume must not be mounted.\n\noptions";
}

}  // namespace

int volume_keyslot(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    (argc < 2 ? std::cerr : std::cout) << kVolumeUsage;
    return argc < 2 ? kExitUsage : kExitOk;
  }
  KeySlotArgs a;
  a.verb = parse_keyslot_verb(argv[1]);
  std::string container;
  po::options_description opts(verb_usage(a.verb));
  opts.add_options()("help,h", "show this help");
  add_keyslot_options(opts, a.verb, &a);
  if (!parse_command_line(argc - 1, argv + 1, opts, {{"CONTAINER", &container}})) return kExitOk;
  check_keyslot_args(a);
  require_volume_container(container, "keyslot");
  if (a.verb == KeySlotVerb::List) {
    const VolumeHeader h = VolumeContainer::read_header(container);  // CorruptData (23) when no copy is whole
    print_keyslot_list(std::cout, h.copies.front().config);
    return kExitOk;
  }
  VolumeContainer vol(container, true);  // exclusive lock: refuses a mounted volume
  vol.check_kdf_cost(kdf_policy(a.allow_expensive_kdf));  // before asking for a password
  if (a.verb == KeySlotVerb::Remove) {  // what the header says, checked again once it is authenticated
    const VaultConfig& c = vol.config();
    // Any copy: a removal cut short between the two copies left the slot in the older one only.
    bool somewhere = false;
    for (const auto& copy : vol.header().copies) somewhere = somewhere || copy.config.find_slot(a.slot);
    if (!c.has_key_slots()) throw UserError(container + " has a config of version 1: one password, no key slots to remove");
    if (!somewhere)
      throw UserError("there is no key slot " + std::to_string(a.slot) + " ('gpucryptfs volume keyslot list' shows them)");
    if (c.slots.size() == 1 && c.find_slot(a.slot))
      throw UserError("key slot " + std::to_string(a.slot) + " is the last one: without it nothing would open the "
                      "volume; add another first");
  }
  // A new secret from a file is read first: a missing or empty one then costs no typed password.
  std::optional<UnlockSecret> fresh;
  if (a.verb == KeySlotVerb::Add && a.fresh.given()) fresh = read_unlock_secret(a.fresh, "New password: ", true);
  SecretBytes master;
  VaultConfig next;
  KeySlotKind opened_kind = KeySlotKind::Password;
  {
    UnlockSecret secret = read_unlock_secret(a.unlock, "Password: ");
    opened_kind = secret.kind;
    master = vol.unlock(secret.text.view(), kdf_policy(a.allow_expensive_kdf), secret.kind);
    std::cout << unlocked_line(vol.opened_slot(), opened_kind) << "\n";
    next = vol.config();
    if (a.verb == KeySlotVerb::Add && !next.has_key_slots()) {
      next.upgrade_to_key_slots(master, secret.text.view());
      std::cout << "Upgrading the header to config version 2: its password is key slot 0.\n";
    }
  }  // the secret is wiped here, or on the way out
  if (a.verb == KeySlotVerb::Add) {
    const ScryptParams cost = new_slot_cost(a, vol.config(), vol.opened_slot());
    if (!fresh) fresh = read_unlock_secret(a.fresh, "New password: ", true);
    const int number = next.add_slot(master, fresh->text.view(), fresh->kind, cost);
    fresh.reset();
    vol.replace_config(next);
    std::cout << "Added key slot " << number << " (a " << key_slot_kind_words(next.find_slot(number)->kind)
              << "); the volume has " << next.slots.size() << " key slots (both header copies).\n";
    return kExitOk;
  }
  // Not in the copy that opened: an earlier removal wrote that copy and was cut short before the
  // other; writing both again finishes it.
  if (next.find_slot(a.slot)) next.remove_slot(a.slot);
  vol.replace_config(next);
  std::cout << "Removed key slot " << a.slot << " from both header copies; " << next.slots.size() << " left.\n"
            << "Note: a copy of the container's old header (a backup, a snapshot) still opens the volume with that "
               "slot's secret: the master key is the same; see docs/SECURITY.md.\n";
  return kExitOk;
}

}  // namespace gcfs::cli
