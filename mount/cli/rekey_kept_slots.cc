#include "mount/cli/rekey_kept_slots.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "crypto/errors.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

// "N=FILE" of --slot-passfile / --slot-keyfile.
std::pair<int, std::string> slot_and_file(const std::string& option, const std::string& text) {
  const auto eq = text.find('=');
  int n = -1;
  if (eq != std::string::npos && eq > 0 && eq + 1 < text.size() &&
      std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(eq), ::isdigit) && eq <= 2)
    n = std::stoi(text.substr(0, eq));
  if (n < 0 || n >= kMaxKeySlots)
    throw po::error("--" + option + " takes SLOT=FILE (a key slot number 0-" + std::to_string(kMaxKeySlots - 1) +
                    " and a file), not '" + text + "'");
  return {n, text.substr(eq + 1)};
}

// Whether secret opens slot `number` of config and gives master.
bool opens_slot(const VaultConfig& config, int number, const UnlockSecret& secret, const SecretBytes& master,
                KdfPolicy policy) {
  VaultConfig one = config;
  one.slots.erase(std::remove_if(one.slots.begin(), one.slots.end(), [&](const KeySlot& s) { return s.number != number; }),
                  one.slots.end());
  try {
    return one.unlock(secret.text.view(), policy, secret.kind) == master;
  } catch (const WrongPassword&) {
    return false;
  }
}

}  // namespace

void add_rekey_slot_options(po::options_description& opts, RekeySlotArgs* a) {
  opts.add_options()
      ("slot-passfile", po::value(&a->slot_passfiles)->composing(),
       "N=FILE: key slot N stays, under the password in the first line of FILE (repeatable)")
      ("slot-keyfile", po::value(&a->slot_keyfiles)->composing(),
       "N=FILE: key slot N stays, under the key file FILE (repeatable)")
      ("drop-other-slots", po::bool_switch(&a->drop_others),
       "remove every key slot whose secret is not given (the one that unlocks always stays)");
}

KeptSlots gather_kept_slots(const VaultConfig& config, int opened_slot, UnlockSecret opened, const SecretBytes& master,
                            const RekeySlotArgs& args, KdfPolicy policy) {
  KeptSlots kept;
  std::map<int, std::pair<std::string, KeySlotKind>> given;
  for (const auto& t : args.slot_passfiles) {
    auto [n, f] = slot_and_file("slot-passfile", t);
    given[n] = {f, KeySlotKind::Password};
  }
  for (const auto& t : args.slot_keyfiles) {
    auto [n, f] = slot_and_file("slot-keyfile", t);
    if (given.count(n)) throw po::error("key slot " + std::to_string(n) + " is given two secrets");
    given[n] = {f, KeySlotKind::KeyFile};
  }
  if (!config.has_key_slots()) {
    if (!given.empty()) throw UserError("this config (version 1) has one password and no key slots: no --slot-* options");
    kept.secrets.emplace_back(-1, std::move(opened));
    return kept;
  }
  for (const auto& [n, g] : given) {
    const KeySlot* s = config.find_slot(n);
    if (!s) throw UserError("there is no key slot " + std::to_string(n) + " ('keyslot list' shows them)");
    if (s->kind != g.second)
      throw UserError("key slot " + std::to_string(n) + " holds a " + std::string(key_slot_kind_words(s->kind)) +
                      ": give it with --slot-" + (s->kind == KeySlotKind::Password ? "passfile" : "keyfile"));
  }
  const bool terminal = ::isatty(STDIN_FILENO) == 1;
  std::vector<std::string> missing;
  for (const KeySlot& s : config.slots) {
    if (s.number == opened_slot) {
      kept.secrets.emplace_back(s.number, std::move(opened));
      continue;
    }
    UnlockSecret secret;
    if (auto g = given.find(s.number); g != given.end()) {
      PasswordSource src;
      (g->second.second == KeySlotKind::Password ? src.passfile : src.keyfile) = g->second.first;
      secret = read_unlock_secret(src, "");
    } else if (args.drop_others) {
      kept.dropped.push_back(s.number);
      continue;
    } else if (terminal && s.kind == KeySlotKind::Password) {
      secret = read_unlock_secret(PasswordSource{}, "Password of key slot " + std::to_string(s.number) + ": ");
    } else {
      missing.push_back(std::to_string(s.number) + " (a " + std::string(key_slot_kind_words(s.kind)) + ")");
      continue;
    }
    if (!opens_slot(config, s.number, secret, master, policy))
      throw WrongPassword("the secret given for key slot " + std::to_string(s.number) + " does not open it");
    kept.secrets.emplace_back(s.number, std::move(secret));
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw UserError("no secret for key slot " + list +
                    ": a slot moves to the new master key only with its secret. Give --slot-passfile N=FILE or "
                    "--slot-keyfile N=FILE, or --drop-other-slots to remove the slots without one; nothing was changed");
  }
  return kept;
}

VaultConfig rekeyed_config(const VaultConfig& config, const KeptSlots& kept, const SecretBytes& new_master) {
  VaultConfig next = config;
  if (!config.has_key_slots()) {
    next.rewrap(new_master, kept.secrets.front().second.text.view());
    return next;
  }
  for (const KeySlot& s : config.slots) {  // every slot moves or goes: none may keep the old key
    const bool covered = std::count(kept.dropped.begin(), kept.dropped.end(), s.number) ||
                         std::any_of(kept.secrets.begin(), kept.secrets.end(), [&](auto& k) { return k.first == s.number; });
    if (!covered) throw std::logic_error("rekeyed_config: key slot " + std::to_string(s.number) + " neither kept nor dropped");
  }
  for (int n : kept.dropped) next.remove_slot(n);
  for (const auto& [n, secret] : kept.secrets) next.rewrap_slot(n, new_master, secret.text.view(), secret.kind);
  next.seal(new_master);
  return next;
}

}  // namespace gcfs::cli
