#include "mount/cli/rekey_options.h"

#include <algorithm>

#include "crypto/errors.h"

namespace po = boost::program_options;

namespace gcfs::cli {

void add_rekey_slot_options(po::options_description& opts, RekeySlotArgs* a) {
  opts.add_options()("slot-passfile", po::value(&a->slot_passfiles)->composing(),
                     "N=FILE: key slot N's password is the first line of FILE (repeatable)")(
      "slot-keyfile", po::value(&a->slot_keyfiles)->composing(), "N=FILE: key slot N's key file is FILE (repeatable)")(
      "drop-slot", po::value(&a->drop_slots)->composing(), "N: the new config does not keep key slot N (repeatable)")(
      "keep-only-unlocking-slot", po::bool_switch(&a->keep_only_unlocking_slot),
      "drop every key slot but the one that unlocks");
}

std::pair<int, std::string> parse_slot_file_arg(const std::string& arg, const char* option) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    throw po::error(std::string("--") + option + " takes N=FILE (the slot's number, '=', the file), got '" + arg + "'");
  int n = -1;
  try {
    std::size_t used = 0;
    n = std::stoi(arg.substr(0, eq), &used);
    if (used != eq) n = -1;
  } catch (const std::exception&) {
    n = -1;
  }
  if (n < 0 || n >= kMaxKeySlots)
    throw po::error(std::string("--") + option + ": '" + arg.substr(0, eq) + "' is not a key slot number (0 to " +
                    std::to_string(kMaxKeySlots - 1) + ")");
  return {n, arg.substr(eq + 1)};
}

std::vector<KeptSlot> KeptSlotSecrets::kept() const {
  std::vector<KeptSlot> out;
  for (const Entry& e : entries) out.push_back({e.number, e.kind, e.secret.view(), e.verified});
  return out;
}

KeptSlotSecrets gather_kept_slot_secrets(const RekeySlotArgs& a, const VaultConfig& cfg, int opened_slot,
                                         const UnlockSecret& unlocking, bool interactive) {
  const int unlocked = opened_slot < 0 ? 0 : opened_slot;  // version 1: its password is slot 0
  const std::vector<KeySlot> slots = rekey_source_slots(cfg);
  auto slot_of = [&](int n, const char* option) -> const KeySlot& {
    for (const KeySlot& s : slots)
      if (s.number == n) {
        if (n == unlocked)
          throw po::error(std::string("--") + option + " names key slot " + std::to_string(n) +
                          ", the one that unlocked: it is kept with the secret that opened it");
        return s;
      }
    throw po::error(std::string("--") + option + " names key slot " + std::to_string(n) +
                    ", which the config does not have ('gpucryptfs keyslot list' shows them)");
  };
  std::map<int, std::pair<KeySlotKind, std::string>> files;
  auto take_files = [&](const std::vector<std::string>& args, KeySlotKind kind, const char* option) {
    for (const std::string& arg : args) {
      auto [n, file] = parse_slot_file_arg(arg, option);
      const KeySlot& s = slot_of(n, option);
      if (s.kind != kind)
        throw po::error(std::string("--") + option + ": key slot " + std::to_string(n) + " is a " +
                        std::string(key_slot_kind_words(s.kind)) + " slot");
      if (!files.emplace(n, std::make_pair(kind, file)).second)
        throw po::error("key slot " + std::to_string(n) + " is given a secret twice");
    }
  };
  take_files(a.slot_passfiles, KeySlotKind::Password, "slot-passfile");
  take_files(a.slot_keyfiles, KeySlotKind::KeyFile, "slot-keyfile");
  std::set<int> drop(a.drop_slots.begin(), a.drop_slots.end());
  for (int n : drop) {
    slot_of(n, "drop-slot");
    if (files.count(n)) throw po::error("key slot " + std::to_string(n) + " is both given a secret and dropped");
  }
  if (a.keep_only_unlocking_slot && !files.empty())
    throw po::error("--keep-only-unlocking-slot drops every other slot: give no --slot-passfile or --slot-keyfile with it");

  KeptSlotSecrets out;
  std::vector<int> missing;
  for (const KeySlot& s : slots) {
    if (s.number == unlocked) {
      out.entries.push_back({s.number, s.kind, SecretString(unlocking.text.view()), true});
    } else if (drop.count(s.number) || a.keep_only_unlocking_slot) {
      out.dropped.push_back(s.number);
    } else if (auto f = files.find(s.number); f != files.end()) {
      PasswordSource src;
      (f->second.first == KeySlotKind::KeyFile ? src.keyfile : src.passfile) = f->second.second;
      UnlockSecret secret = read_unlock_secret(src, "");
      out.entries.push_back({s.number, s.kind, std::move(secret.text), false});
    } else {
      missing.push_back(s.number);
    }
  }
  if (!missing.empty() && !interactive) {
    std::string list;
    for (int n : missing) list += (list.empty() ? "" : ", ") + std::to_string(n);
    throw UserError("key slot" + std::string(missing.size() == 1 ? " " : "s ") + list +
                    (missing.size() == 1 ? " has" : " have") +
                    " no secret: a re-key wraps the new master key anew in every slot it keeps, which needs each "
                    "slot's own secret; give it with --slot-passfile N=FILE or --slot-keyfile N=FILE, or drop the "
                    "slot with --drop-slot N (or --keep-only-unlocking-slot). Nothing was changed");
  }
  for (int n : missing) {
    const KeySlot& s = *std::find_if(slots.begin(), slots.end(), [&](const KeySlot& k) { return k.number == n; });
    if (s.kind == KeySlotKind::KeyFile)
      throw UserError("key slot " + std::to_string(n) +
                      " is a key file slot: give its file with --slot-keyfile N=FILE, or drop it with --drop-slot N");
    SecretString pw = read_password(PasswordSource{}, "Password of key slot " + std::to_string(n) + " (a password): ");
    out.entries.push_back({n, s.kind, std::move(pw), false});
  }
  std::sort(out.entries.begin(), out.entries.end(), [](const auto& x, const auto& y) { return x.number < y.number; });
  return out;
}

}  // namespace gcfs::cli
