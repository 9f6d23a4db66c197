#include "mount/cli/key_slot_text.h"

#include <string>

namespace gcfs::cli {
namespace {

void warn_if_refused(std::ostream& out, const std::string& whose, const ScryptParams& p) {
  if (const std::string why = kdf_cost_beyond_init(p, machine_memory_bytes()); !why.empty())
    out << "Warning:      " << whose << why
        << ": mount, passwd, fsck and keyslot refuse it unless given --allow-expensive-kdf\n";
}

}  // namespace

std::string scrypt_cost_text(const ScryptParams& p) {
  return "scrypt N=2^" + std::to_string(p.log_n) + " r=" + std::to_string(p.r) + " p=" + std::to_string(p.p);
}

void print_key_slots(std::ostream& out, const VaultConfig& c) {
  if (!c.has_key_slots()) {
    out << "Keys:         config version 1: one password, no key slots ('gpucryptfs keyslot add' upgrades it)\n"
        << "Key from:     " << scrypt_cost_text(c.scrypt) << "\n";
    warn_if_refused(out, "", c.scrypt);
    return;
  }
  out << "Keys:         config version " << c.config_version << ", " << c.slots.size() << " key slot"
      << (c.slots.size() == 1 ? "" : "s") << " (at most " << kMaxKeySlots << ")\n";
  for (const KeySlot& s : c.slots) {
    std::string label = "Key slot " + std::to_string(s.number) + ":";
    label.resize(std::max<std::size_t>(label.size() + 1, 14), ' ');
    out << label << key_slot_kind_words(s.kind) << ", " << scrypt_cost_text(s.scrypt) << "\n";
  }
  for (const KeySlot& s : c.slots) warn_if_refused(out, "key slot " + std::to_string(s.number) + ": ", s.scrypt);
}

}  // namespace gcfs::cli
