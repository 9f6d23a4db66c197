// Cryptographically secure random bytes (OpenSSL's DRBG). Throws if the generator fails: a nonce
// or key that is not random must never be used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace gcfs {

void random_bytes(std::span<std::uint8_t> out);

// Random bytes for values that are public once used (chunk nonces, written next to the
// ciphertext), from the same generator, drawn a few hundred bytes at a time into a per-thread
// pool: one RAND_bytes call per small write (its locks, its fork check, its reseed test) was 9%
// of the daemon's time on random 4 KiB writes. Never for keys. A child of fork() discards the
// pool it inherited, so parent and child never hand out the same bytes.
void random_public_bytes(std::span<std::uint8_t> out);

}  // namespace gcfs
