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

#include "crypto/errors.h"
#include "crypto/kdf.h"
#include "crypto/secret.h"

namespace gcfs {

// Format versions (docs/FORMAT.md); every version from 1 to kMaxFormatVersion is read. Version 2
// (directory vaults only) stores chunk data at 4 KiB-aligned offsets; its config is the same JSON
// with "version": 2. kFormatVersion is version 1: volumes, reverse views and every vault made
// before version 2 existed. `init` makes kDefaultDirectoryFormat unless told otherwise.
constexpr int kFormatVersion = 1;
constexpr int kDefaultDirectoryFormat = 2;
constexpr int kMaxFormatVersion = 2;
// Volumes: one key for the whole container, whose nonce budget counts chunk writes (FORMAT.md).
constexpr std::uint32_t kDefaultChunkSize = 64 * 1024;
// Directory vaults: what `init` chooses. 4 KiB, the page size, by measurement (docs/BENCHMARKS.md,
// "Choosing the default chunk size"): a 4 KiB random read or write then costs one chunk instead of
// sixteen, at the same stream speed, for 0.7% of space instead of 0.04%.
constexpr std::uint32_t kDefaultDirectoryChunkSize = 4 * 1024;
constexpr std::uint32_t kMinChunkSize = 4 * 1024;
constexpr std::uint32_t kMaxChunkSize = 1024 * 1024;
constexpr const char* kConfigFileName = "gpucryptfs.conf";

enum class VaultKind { Directory, Volume };

// The scrypt costs `init` and `volume create` choose from: N = 2^10 to 2^28 (--scrypt-logn),
// always with r = 8 and p = 1.
constexpr int kMinScryptLogN = 10;
constexpr int kMaxScryptLogN = 28;
constexpr int kInitScryptR = 8;
constexpr int kInitScryptP = 1;

// Whether unlocking may run scrypt at a cost above what init creates. The cost is read from the
// config before anything in it is authenticated, so anyone who can write CIPHERDIR (or the
// container) could otherwise make every unlock take minutes and gigabytes before "wrong password".
enum class KdfPolicy { RefuseAboveInit, AllowExpensive };

// The config asks for a scrypt cost that init never chooses, and no option allowed it. A config
// gpucryptfs did not write, so the CLI reports it as a damaged config (exit 23).
struct ExpensiveKdf : CorruptData {
  using CorruptData::CorruptData;
};

// Empty when `params` are within what init creates and their memory fits `machine_memory` bytes
// (at most half of it); else why not, naming the cost: "scrypt N=2^20, r=8, p=4, above the
// most `init` creates (...)".
std::string kdf_cost_beyond_init(const ScryptParams& params, std::uint64_t machine_memory);
// This machine's physical memory in bytes (0 when it cannot be told: the memory test is skipped).
std::uint64_t machine_memory_bytes();

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
                            VaultKind kind, SecretBytes* master_out = nullptr, int format = kFormatVersion);

  // The parameters a new config of this kind and chunk size has (format version, cipher, features,
  // the default scrypt cost), without a key: what a mount with the master key and no config file
  // assumes, and what rewrap() then completes into a config (passwd --masterkey).
  // format: the content format version (a lost config's is read from the files' headers).
  static VaultConfig defaults(std::uint32_t chunk_size, VaultKind kind, int format = kFormatVersion);

  // Throws WrongPassword when the wrap does not open, and ExpensiveKdf (before running scrypt)
  // when the cost is above what init creates and policy does not allow it.
  SecretBytes unlock(std::string_view password, KdfPolicy policy = KdfPolicy::RefuseAboveInit) const;
  // The cost check of unlock() alone, for commands that want to refuse before asking for a
  // password. Throws ExpensiveKdf naming the cost and the option that allows it.
  void check_kdf_cost(KdfPolicy policy) const;
  // Wraps master again under a new password with a new salt (passwd).
  void rewrap(const SecretBytes& master, std::string_view new_password);

  std::string to_json() const;
  // Throws CorruptData with the field that is wrong, UserError for a newer format version.
  static VaultConfig from_json(std::string_view text);

  // Reading and writing gpucryptfs.conf is fs/config_file.h's job: crypto/ knows no files.

  // The bytes authenticated along with the wrapped key: every field but the wrap itself.
  std::string authenticated_fields() const;
};

bool valid_chunk_size(std::uint64_t n);

}  // namespace gcfs
