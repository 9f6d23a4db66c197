// The record of a re-key in progress (docs/FORMAT.md, "Re-keying"): what a re-key killed at any
// moment needs to finish with nothing but one unlock of the old config. It holds the complete new
// config (every kept slot already wrapping the new key, so no other slot's secret is asked for
// again) and the new master key wrapped with AES-256-GCM under a key derived from the OLD master
// key; the GCM tag covers every byte of the record, so a torn, truncated or edited record is
// refused, never half trusted. No key is ever in it in the clear.
//
// Bytes only: where the record is kept (a file in CIPHERDIR, a volume's header area) is the
// caller's business.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "crypto/secret.h"

namespace gcfs {

// "GCFSRKY" and the record's layout version.
constexpr std::array<std::uint8_t, 8> kRekeyRecordMagic = {'G', 'C', 'F', 'S', 'R', 'K', 'Y', '1'};
// A config is at most 16 KiB (fs/config_file.h); a record is that and 100 bytes.
constexpr std::size_t kMaxRekeyRecordBytes = 17 * 1024;

struct RekeyRecord {
  std::array<std::uint8_t, 16> id{};  // random: names this re-key in the log
  std::string new_config_json;        // the config the re-key ends by writing, as it will be written
  std::array<std::uint8_t, 12> nonce{};
  std::array<std::uint8_t, 32> wrapped_new_master{};
  std::array<std::uint8_t, 16> tag{};

  // A new record: a fresh id and nonce, new_master sealed under old_master's record key.
  static RekeyRecord make(const SecretBytes& old_master, const SecretBytes& new_master, std::string new_config_json);
  std::vector<std::uint8_t> to_bytes() const;
  // The layout alone (magic, lengths): CorruptData saying what is wrong with a torn or foreign
  // record. Nothing is authenticated yet: open() does that.
  static RekeyRecord from_bytes(std::span<const std::uint8_t> bytes);
  // The new master key, when old_master is the key this record was made under and no byte of it
  // changed (constant-time tag check); nullopt otherwise.
  std::optional<SecretBytes> open(const SecretBytes& old_master) const;
  // "3f2a...": the id's first 8 bytes in hex, for messages.
  std::string id_text() const;
};

}  // namespace gcfs
