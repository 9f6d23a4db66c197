// VaultConfig::from_json over arbitrary bytes: gpucryptfs.conf is the first thing every command
// reads, and anyone who can write the ciphertext folder can write it.
// Properties: only UserError (CorruptData included) may escape; a config that parses serialises
// and parses back to the same authenticated fields, so what is authenticated is what is used.
#include <cstdint>
#include <string>
#include <string_view>

#include "crypto/errors.h"
#include "crypto/vault_config.h"
#include "tests/fuzz/fuzz_common.h"

using namespace gcfs;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seed_dir()) return 0;
  ScryptParams fast{10, 8, 1};  // from_json never runs scrypt; small values keep seeding quick
  fuzz::write_seed("directory.json", VaultConfig::create("password", 65536, fast, VaultKind::Directory).to_json());
  auto vol = VaultConfig::create("password", 4096, fast, VaultKind::Volume);
  vol.volume_size = 1 << 30;
  fuzz::write_seed("volume.json", vol.to_json());
  fuzz::write_seed("compact.json", VaultConfig::create("x", 1 << 20, fast, VaultKind::Directory).to_json(-1));
  // Three key slots (two passwords, a key file), and a config of version 1 (one password wrap).
  SecretBytes master;
  auto slotted = VaultConfig::create("password", 4096, fast, VaultKind::Directory, &master, 2);
  slotted.add_slot(master, "second", KeySlotKind::Password, fast);
  slotted.add_slot(master, std::string("\0key\nfile", 9), KeySlotKind::KeyFile, fast);
  fuzz::write_seed("three-slots.json", slotted.to_json());
  auto v1 = VaultConfig::defaults(65536, VaultKind::Directory, 1);
  v1.config_version = kConfigVersionSingleKey;
  v1.scrypt = fast;
  v1.rewrap(master, "password");
  fuzz::write_seed("version1.json", v1.to_json());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  VaultConfig c;
  try {
    c = VaultConfig::from_json(text);
  } catch (const UserError&) {
    return 0;  // refused with a message: the expected outcome for almost every input
  }
  if (!valid_chunk_size(c.chunk_size)) fuzz::fail("accepted chunk size " + std::to_string(c.chunk_size));
  if (const std::string wrong = fuzz::key_wraps_wrong(c); !wrong.empty()) fuzz::fail("accepted " + wrong);
  VaultConfig again;
  try {
    again = VaultConfig::from_json(c.to_json());
  } catch (const UserError& e) {
    fuzz::fail(std::string("a config that parsed does not parse after to_json: ") + e.what());
  }
  if (again.authenticated_fields() != c.authenticated_fields() || again.to_json() != c.to_json())
    fuzz::fail("to_json/from_json round trip changed the config");
  return 0;
}
