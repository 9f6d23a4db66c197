// A config of version 1 (one password wrap, no key slots), as every gpucryptfs before key slots
// wrote it: for the tests that keep such configs opening and refusing as they always did.
#pragma once

#include <string_view>

#include "crypto/random.h"
#include "crypto/vault_config.h"

namespace gcfs::test {

inline VaultConfig version1_config(std::string_view password, std::uint32_t chunk_size, const ScryptParams& scrypt,
                                   VaultKind kind, SecretBytes* master_out = nullptr, int format = kFormatVersion,
                                   std::uint64_t volume_size = 0) {
  VaultConfig c = VaultConfig::defaults(chunk_size, kind, format);
  c.config_version = kConfigVersionSingleKey;
  c.scrypt = scrypt;
  c.volume_size = volume_size;
  SecretBytes master(32);
  random_bytes(master);
  c.rewrap(master, password);
  if (master_out) *master_out = std::move(master);
  return c;
}

}  // namespace gcfs::test
