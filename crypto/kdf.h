// Key derivation: scrypt turns the password into the key-wrapping key; HKDF-SHA256 turns the
// master key into independent subkeys (per-file content keys, the names key).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "crypto/secret.h"

namespace gcfs {

struct ScryptParams {
  int log_n = 17;  // N = 2^17: about 128 MiB and a fraction of a second, as gocryptfs defaults to
  int r = 8;
  int p = 1;
};

SecretBytes scrypt(std::string_view password, std::span<const std::uint8_t> salt,
                   const ScryptParams& params, std::size_t out_len);

SecretBytes hkdf_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> salt,
                        std::span<const std::uint8_t> info, std::size_t out_len);

}  // namespace gcfs
