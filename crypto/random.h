// Cryptographically secure random bytes (OpenSSL's DRBG). Throws if the generator fails: a nonce
// or key that is not random must never be used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace gcfs {

void random_bytes(std::span<std::uint8_t> out);

}  // namespace gcfs
