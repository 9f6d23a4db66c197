// Reverse mode's deterministic values. A forward vault draws file IDs, directory IVs and nonces
// at random; reverse mode shows a ciphertext view of a plaintext folder that must come out the
// same on every mount (so incremental backups stay incremental), so it derives them with
// HMAC-SHA256 under the reverse key (crypto/key_ring.h), one label per purpose:
//
//   directory IV  = HMAC(K, "dir iv"  || 0 || relative path)[0..16)
//   file ID       = HMAC(K, "file id" || 0 || relative path)[0..16)
//   chunk nonce   = HMAC(K, "chunk"   || 0 || file ID || be64(k) || chunk plaintext)[0..12)
//   symlink nonce = HMAC(K, "symlink" || 0 || relative path || 0 || target)[0..12)
//
// The chunk nonce is synthetic (SIV-style): it covers the chunk's plaintext, so a chunk whose
// contents change gets a new nonce and a GCM nonce never seals two different plaintexts under one
// key; only an identical chunk at the same place repeats, giving the identical ciphertext.
// docs/SECURITY.md ("Reverse mode") says what that reveals. Relative paths are those inside
// PLAINDIR, without a leading slash ("" for PLAINDIR itself).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "crypto/key_ring.h"
#include "crypto/name_cipher.h"

namespace gcfs {

class ReverseDerivation {
 public:
  explicit ReverseDerivation(const KeyRing& keys) : key_(keys.reverse_key()) {}

  DirIv dir_iv(std::string_view rel_path) const;
  FileId file_id(std::string_view rel_path) const;
  std::array<std::uint8_t, 12> chunk_nonce(const FileId& id, std::uint64_t chunk,
                                           std::span<const std::uint8_t> plaintext) const;
  std::array<std::uint8_t, 12> symlink_nonce(std::string_view rel_path, std::string_view target) const;

 private:
  ReverseKey key_;
};

}  // namespace gcfs
