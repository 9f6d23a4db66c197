// AES-SIV (RFC 5297) through OpenSSL: deterministic authenticated encryption, used for file names
// so that the same name in the same directory always maps to the same ciphertext name (lookups
// need no directory scan) while a changed ciphertext name is detected.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace gcfs {

constexpr std::size_t kSivTagBytes = 16;

// key: 32 bytes (AES-128-SIV, the RFC's test vectors) or 64 bytes (AES-256-SIV, what vaults use).
// The result is the synthetic IV followed by the ciphertext, as RFC 5297 writes it. aad and
// plaintext must not be empty (std::invalid_argument): OpenSSL's SIV cannot process either.
std::vector<std::uint8_t> siv_encrypt(std::span<const std::uint8_t> key, std::span<const std::uint8_t> aad,
                                      std::span<const std::uint8_t> plaintext);

// nullopt when the input is too short or fails authentication; aad must not be empty.
std::optional<std::vector<std::uint8_t>> siv_decrypt(std::span<const std::uint8_t> key,
                                                     std::span<const std::uint8_t> aad,
                                                     std::span<const std::uint8_t> sealed);

}  // namespace gcfs
