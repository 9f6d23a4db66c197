// File name encryption: AES-256-SIV under the names key with the directory's random IV as
// associated data, base64url encoded. Deterministic within a directory (a lookup encrypts the name
// and opens it directly), unlinkable across directories (the same name in two directories gives
// two unrelated ciphertexts).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "crypto/key_ring.h"

namespace gcfs {

constexpr std::size_t kDirIvBytes = 16;
using DirIv = std::array<std::uint8_t, kDirIvBytes>;

class NameCipher {
 public:
  explicit NameCipher(const NamesKey& key) : key_(key) {}
  std::string encrypt(std::string_view name, const DirIv& dir_iv) const;
  // nullopt when the text is not base64url or fails authentication (not one of our names, or
  // moved from another directory).
  std::optional<std::string> decrypt(std::string_view encrypted, const DirIv& dir_iv) const;

 private:
  NamesKey key_;
};

}  // namespace gcfs
