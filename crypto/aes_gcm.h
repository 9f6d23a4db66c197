// One-shot AES-256-GCM through OpenSSL's EVP interface, for small messages (the wrapped master key,
// the known-answer tests). Bulk chunk sealing goes through a ChunkEngine instead.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace gcfs {

constexpr std::size_t kGcmKeyBytes = 32;
constexpr std::size_t kGcmNonceBytes = 12;
constexpr std::size_t kGcmTagBytes = 16;

// Encrypts in into out (same length) and returns the tag. Any IV length GCM allows is accepted, so
// the specification's test vectors with 8- and 60-byte IVs can be checked too.
std::array<std::uint8_t, kGcmTagBytes> gcm_seal(std::span<const std::uint8_t> key,
                                                std::span<const std::uint8_t> iv,
                                                std::span<const std::uint8_t> aad,
                                                std::span<const std::uint8_t> in, std::uint8_t* out);

// Returns false, with out wiped, when the tag does not match; the comparison is OpenSSL's
// constant-time one.
bool gcm_open(std::span<const std::uint8_t> key, std::span<const std::uint8_t> iv,
              std::span<const std::uint8_t> aad, std::span<const std::uint8_t> in,
              std::span<const std::uint8_t> tag, std::uint8_t* out);

}  // namespace gcfs
