// Shared by the fuzz targets: a fixed master key (fuzzing needs reproducible keys, and none of this
// is a secret), and seed corpora written on request.
//
// Seeds that must be encrypted under the fixed key (names, chunks) cannot be checked in as plain
// files without going stale when the format changes, so each target writes its own: run the target
// with GCFS_FUZZ_WRITE_SEEDS=DIR and it fills DIR before fuzzing starts (scripts/fuzz.sh does this).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "crypto/key_ring.h"
#include "crypto/vault_config.h"

namespace gcfs::fuzz {

inline const KeyRing& fixed_keys() {
  static const KeyRing keys = [] {
    std::array<std::uint8_t, kMasterKeyBytes> master{};
    for (std::size_t i = 0; i < master.size(); ++i) master[i] = static_cast<std::uint8_t>(0xA5 ^ (i * 29));
    return KeyRing(master);
  }();
  return keys;
}

// Stops the fuzzer with a message: a broken property is as much a finding as a crash.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

inline const char* seed_dir() { return std::getenv("GCFS_FUZZ_WRITE_SEEDS"); }

inline void write_seed(const std::string& name, std::span<const std::uint8_t> bytes) {
  const char* dir = seed_dir();
  if (!dir) return;
  const std::string path = std::string(dir) + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    std::exit(1);
  }
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

inline void write_seed(const std::string& name, const std::string& text) {
  write_seed(name, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

// A config that parsed holds key wraps of a master key's length: one for config version 1, one
// per slot, 1 to kMaxKeySlots of them numbered once each in range, for version 2. Empty when so,
// else what is wrong.
inline std::string key_wraps_wrong(const VaultConfig& c) {
  if (!c.has_key_slots()) return c.wrapped_key.size() == kMasterKeyBytes ? "" : "a wrapped key of the wrong length";
  if (c.slots.empty() || c.slots.size() > static_cast<std::size_t>(kMaxKeySlots)) return "a key slot count out of range";
  for (std::size_t i = 0; i < c.slots.size(); ++i) {
    const KeySlot& s = c.slots[i];
    if (s.wrapped_key.size() != kMasterKeyBytes) return "a key slot's wrapped key of the wrong length";
    if (s.number < 0 || s.number >= kMaxKeySlots || (i > 0 && c.slots[i - 1].number >= s.number))
      return "key slot numbers out of range, repeated or out of order";
  }
  return "";
}

// The scrypt costs unlocking would run: version 1's one, or each slot's.
inline std::vector<ScryptParams> kdf_costs(const VaultConfig& c) {
  if (!c.has_key_slots()) return {c.scrypt};
  std::vector<ScryptParams> out;
  for (const KeySlot& s : c.slots) out.push_back(s.scrypt);
  return out;
}

}  // namespace gcfs::fuzz
