// Small authenticated blobs (symlink targets, xattr values): AES-256-GCM with a random nonce, laid
// out as nonce || ciphertext || tag. Random nonces keep equal targets from looking equal on disk.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "crypto/key_ring.h"

namespace gcfs {

std::vector<std::uint8_t> seal_blob(const BlobKey& key, std::span<const std::uint8_t> aad,
                                    std::span<const std::uint8_t> plaintext);
// The same with a nonce the caller derived (reverse mode: one plaintext, one ciphertext). The
// caller guarantees that a nonce never seals two different plaintexts under one key.
std::vector<std::uint8_t> seal_blob_with_nonce(const BlobKey& key, std::span<const std::uint8_t, 12> nonce,
                                               std::span<const std::uint8_t> aad, std::span<const std::uint8_t> plaintext);
std::optional<std::vector<std::uint8_t>> open_blob(const BlobKey& key, std::span<const std::uint8_t> aad,
                                                   std::span<const std::uint8_t> sealed);

}  // namespace gcfs
