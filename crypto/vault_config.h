// The vault's config file, gpucryptfs.conf: the format's parameters in the clear and the master
// key wrapped with AES-256-GCM under a key that scrypt derives from the password. Every other
// field is the wrap's associated data, so editing any of them (a smaller chunk size, weaker scrypt
// parameters) makes unlocking fail instead of silently changing how the vault is read.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/kdf.h"
#include "crypto/secret.h"

namespace gcfs {

constexpr int kFormatVersion = 1;
constexpr std::uint32_t kDefaultChunkSize = 64 * 1024;
constexpr std::uint32_t kMinChunkSize = 4 * 1024;
constexpr std::uint32_t kMaxChunkSize = 1024 * 1024;
constexpr const char* kConfigFileName = "gpucryptfs.conf";

enum class VaultKind { Directory, Volume };

struct VaultConfig {
  int version = kFormatVersion;
  VaultKind kind = VaultKind::Directory;
  std::string cipher = "AES-256-GCM";
  std::uint32_t chunk_size = kDefaultChunkSize;
  std::uint64_t volume_size = 0;  // volumes only: the plaintext size of volume.img
  ScryptParams scrypt;
  std::vector<std::uint8_t> salt;
  std::vector<std::string> features;
  std::array<std::uint8_t, 12> key_nonce{};
  std::vector<std::uint8_t> wrapped_key;
  std::array<std::uint8_t, 16> key_tag{};

  // A new config with a fresh random master key, wrapped under password. Returns the master key
  // too, so the caller can go on without running scrypt a second time.
  static VaultConfig create(std::string_view password, std::uint32_t chunk_size, const ScryptParams& scrypt,
                            VaultKind kind, SecretBytes* master_out = nullptr);

  // Throws WrongPassword when the wrap does not open.
  SecretBytes unlock(std::string_view password) const;
  // Wraps master again under a new password with a new salt (passwd).
  void rewrap(const SecretBytes& master, std::string_view new_password);

  std::string to_json() const;
  // Throws CorruptData with the field that is wrong, UserError for a newer format version.
  static VaultConfig from_json(std::string_view text);

  // Reads CIPHERDIR/gpucryptfs.conf (or a file path); errors name the path.
  static VaultConfig load_file(const std::string& path);
  // Writes atomically (temporary file, fsync, rename) with mode 0400.
  void save_file(const std::string& path) const;

  // The bytes authenticated along with the wrapped key: every field but the wrap itself.
  std::string authenticated_fields() const;
};

bool valid_chunk_size(std::uint64_t n);

}  // namespace gcfs
