// Remembered results of the name cipher (fs/name_mapping.h). The SIV of a name under a directory
// IV is a function of the two alone (the vault's key fixed), so a remembered result is right for
// as long as the vault is open, whatever happens in CIPHERDIR meanwhile: results are keyed by the
// IV itself, never by a directory or inode, and nothing ever has to be forgotten for correctness.
// It saves the SIV (some 5 to 10 us a name) that a lookup, create, unlink or listing of a name
// seen before would repeat: rm -rf lists every directory two or three times and then names every
// entry again to remove it, and tar looks up each name before it creates it.
//
// Direct-mapped: a fixed number of slots each way, a name's hash picks its slot, and a newer name
// takes the slot of an older one. Nothing is allocated once the slots' strings have grown, and
// the memory is bounded (kSlots names each way, a few MB). It holds plaintext names, which the
// kernel's dentries hold anyway, and nothing of the keys.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "crypto/name_cipher.h"

namespace gcfs {

class NameCache {
 public:
  NameCache();
  ~NameCache();
  NameCache(const NameCache&) = delete;
  NameCache& operator=(const NameCache&) = delete;

  // Encoded names by plaintext, and plaintext names by encoded entry, per IV.
  std::optional<std::string> find_encoded(const DirIv& iv, std::string_view plain);
  void put_encoded(const DirIv& iv, std::string_view plain, std::string_view encoded);
  std::optional<std::string> find_plain(const DirIv& iv, std::string_view encoded);
  void put_plain(const DirIv& iv, std::string_view encoded, std::string_view plain);

  static constexpr std::size_t kSlots = 16384;  // each way

 private:
  struct Slot {
    std::uint64_t hash = 0;
    bool used = false;
    DirIv iv{};
    std::string key;
    std::string value;
  };
  struct Table;
  static std::uint64_t hash_of(const DirIv& iv, std::string_view name);
  std::optional<std::string> find(Table& t, const DirIv& iv, std::string_view key);
  void put(Table& t, const DirIv& iv, std::string_view key, std::string_view value);
  std::unique_ptr<Table> encoded_;  // plaintext -> encoded
  std::unique_ptr<Table> plain_;    // encoded -> plaintext
};

}  // namespace gcfs
