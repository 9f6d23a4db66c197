// The vault's config file, gpucryptfs.conf: the format's parameters in the clear and the master
// key wrapped with AES-256-GCM under a key that scrypt derives from the password. Every other
// field is the wrap's associated data, so editing any of them (a smaller chunk size, weaker scrypt
// parameters) makes unlocking fail instead of silently changing how the vault is read.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/errors.h"
#include "crypto/kdf.h"
#include "crypto/key_slot.h"
#include "crypto/secret.h"

namespace gcfs {

// Format versions (docs/FORMAT.md); every version from 1 to kMaxFormatVersion is read. Version 2
// (directory vaults only) stores chunk data at 4 KiB-aligned offsets; its config is the same JSON
// with "version": 2. kFormatVersion is version 1: volumes, reverse views and every vault made
// before version 2 existed. `init` makes kDefaultDirectoryFormat unless told otherwise.
constexpr int kFormatVersion = 1;
constexpr int kDefaultDirectoryFormat = 2;
constexpr int kMaxFormatVersion = 2;
// init --longnamemax N: no backing name longer than N bytes. The feature names it, so that a
// gpucryptfs from before refuses the config (an unknown feature) rather than write names past N;
// the field "long_name_max" holds N. 62 is the longest of our own names (a .name file's).
constexpr const char* kLongNameMaxFeature = "long_name_max";
constexpr std::uint32_t kMinLongNameMax = 62, kMaxLongNameMax = 255;
// init --deterministic-names: no per-directory IV files; every directory's names are encrypted
// with the all-zero IV (fs/dir_iv_source.h). The feature takes the place of "dir_iv" in the
// features, so a gpucryptfs from before refuses the config (an unknown feature) rather than look
// for IV files that are not there, or write new ones that nothing would read.
constexpr const char* kDeterministicNamesFeature = "deterministic_names";
constexpr const char* kDirIvFeature = "dir_iv";
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

// Config versions (docs/FORMAT.md), apart from the format version above: how the master key is
// kept. Version 1: one password wrap (top-level "kdf" and "encrypted_key"), every field its
// associated data; every config made before key slots existed. Version 2: "keyslots", 1 to
// kMaxKeySlots ways in (crypto/key_slot.h), and a "digest" that binds the config's fields to the
// master key. init and volume create make version 2; `keyslot add` upgrades a version 1 config.
constexpr int kConfigVersionSingleKey = 1;
constexpr int kConfigVersionKeySlots = 2;

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
  int config_version = kConfigVersionKeySlots;
  VaultKind kind = VaultKind::Directory;
  std::string cipher = "AES-256-GCM";
  std::uint32_t chunk_size = kDefaultChunkSize;
  std::uint64_t volume_size = 0;  // volumes only: the plaintext size of volume.img
  // Version 1: the wrap's scrypt cost. Version 2: the cost that rewrap() gives a config without
  // slots (create, passwd --masterkey for a lost config); each slot keeps its own.
  ScryptParams scrypt;
  std::vector<std::string> features;
  // With kLongNameMaxFeature: the longest backing name (kMinLongNameMax..kMaxLongNameMax); 0 when
  // the feature is absent (255, NAME_MAX).
  std::uint32_t long_name_max = 0;
  // kDeterministicNamesFeature is among the features (directory vaults only).
  bool has_deterministic_names() const {
    return std::find(features.begin(), features.end(), kDeterministicNamesFeature) != features.end();
  }
  // Version 1 only: the password's wrap.
  std::vector<std::uint8_t> salt;
  std::array<std::uint8_t, 12> key_nonce{};
  std::vector<std::uint8_t> wrapped_key;
  std::array<std::uint8_t, 16> key_tag{};
  // Version 2 only: the slots, by number, and HMAC-SHA256 of authenticated_fields() under a key
  // derived from the master key.
  std::vector<KeySlot> slots;
  std::array<std::uint8_t, 32> digest{};

  bool has_key_slots() const { return config_version >= kConfigVersionKeySlots; }

  // A new config (version 2) with a fresh random master key in slot 0, under secret. Returns the
  // master key too, so the caller can go on without running scrypt a second time.
  static VaultConfig create(std::string_view secret, std::uint32_t chunk_size, const ScryptParams& scrypt,
                            VaultKind kind, SecretBytes* master_out = nullptr, int format = kFormatVersion,
                            KeySlotKind slot_kind = KeySlotKind::Password, std::uint32_t long_name_max = 0,
                            bool deterministic_names = false);

  // The parameters a new config of this kind and chunk size has (format version, cipher, features,
  // the default scrypt cost), without a key: what a mount with the master key and no config file
  // assumes, and what rewrap() then completes into a config (passwd --masterkey).
  // format: the content format version (a lost config's is read from the files' headers).
  static VaultConfig defaults(std::uint32_t chunk_size, VaultKind kind, int format = kFormatVersion);
  // A directory vault's features say deterministic names (kDeterministicNamesFeature for
  // kDirIvFeature): for create(), and for a lost config's defaults when the files say so. Before
  // any slot is sealed, since the slots and the digest bind the features.
  void use_deterministic_names();

  // Opens the master key with secret. Version 1: the one wrap (a key file opens nothing there).
  // Version 2: each slot of `kind` in turn, number order; the first that opens is checked against
  // the digest. *opened_slot: the slot's number (-1 for version 1).
  // Throws WrongPassword when nothing opens, ExpensiveKdf (before running scrypt) when a cost is
  // above what init creates and policy does not allow it, CorruptData when a slot opens but the
  // digest says the fields were edited.
  SecretBytes unlock(std::string_view secret, KdfPolicy policy = KdfPolicy::RefuseAboveInit,
                     KeySlotKind kind = KeySlotKind::Password, int* opened_slot = nullptr) const;
  // The cost check of unlock() alone (every slot's), for commands that want to refuse before
  // asking for a password. Throws ExpensiveKdf naming the cost and the option that allows it.
  void check_kdf_cost(KdfPolicy policy) const;
  // Wraps master again under a new password with a new salt (passwd). Version 2: the only slot
  // (a config without slots gets slot 0 at `scrypt`'s cost); with several, UserError: say which
  // with rewrap_slot().
  void rewrap(const SecretBytes& master, std::string_view new_password);

  // Version 2 only. Whether master is the key this config's digest was made with. Version 1: true.
  bool master_key_matches(const SecretBytes& master) const;
  // The digest again, after a field changed (a volume's size): needs no slot's secret.
  void seal(const SecretBytes& master);
  // A new slot wrapping master under secret at cost, numbered with the lowest free number;
  // returns it. UserError when kMaxKeySlots are taken.
  int add_slot(const SecretBytes& master, std::string_view secret, KeySlotKind kind, const ScryptParams& cost);
  // UserError when there is no such slot, or it is the last one (the vault would open no more).
  void remove_slot(int number);
  // Slot `number` wraps master under secret of kind, with a fresh salt and nonce, at its cost.
  void rewrap_slot(int number, const SecretBytes& master, std::string_view secret, KeySlotKind kind);
  const KeySlot* find_slot(int number) const;
  // Version 1 -> 2 in memory: the password's wrap becomes slot 0 (under the same password, at the
  // same cost, with a fresh salt), and the digest is made. Nothing else changes.
  void upgrade_to_key_slots(const SecretBytes& master, std::string_view password);

  // indent: nlohmann's (-1 compact, as a volume's header copy stores a config of version 2).
  std::string to_json(int indent = 2) const;
  // Throws CorruptData with the field that is wrong, UserError for a newer format version.
  static VaultConfig from_json(std::string_view text);

  // Reading and writing gpucryptfs.conf is fs/config_file.h's job: crypto/ knows no files.

  // Version 1: the bytes authenticated along with the wrapped key (every field but the wrap).
  // Version 2: what the digest authenticates (every field but the slots and the digest).
  std::string authenticated_fields() const;
};

bool valid_chunk_size(std::uint64_t n);

}  // namespace gcfs
