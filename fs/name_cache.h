// Remembered results of the name cipher (fs/name_mapping.h). The SIV of a name under a directory
// IV is a function of the two alone (the vault's key fixed), so a remembered result is right for
// as long as the vault is open, whatever happens in CIPHERDIR meanwhile: entries are keyed by the
// IV itself, never by a directory or inode, and nothing ever has to be forgotten for correctness.
// It saves the SIV (some 5 to 10 us a name) that a lookup, create, unlink or listing of a name
// seen before would repeat: rm -rf lists every directory two or three times and then names every
// entry again to remove it, and tar looks up each name before it creates it.
//
// Bounded: each of its shards holds at most kPerShard names each way and starts over when full
// (some 13 MB at most). It holds plaintext names, which the kernel's dentries hold anyway, and
// nothing of the keys.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "crypto/name_cipher.h"

namespace gcfs {

class NameCache {
 public:
  // Encrypted (encoded) names by plaintext, and plaintext names by encoded entry, per IV.
  std::optional<std::string> find_encoded(const DirIv& iv, std::string_view plain);
  void put_encoded(const DirIv& iv, std::string_view plain, const std::string& encoded);
  std::optional<std::string> find_plain(const DirIv& iv, std::string_view encoded);
  void put_plain(const DirIv& iv, std::string_view encoded, const std::string& plain);

  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kPerShard = 2048;

 private:
  using Map = std::unordered_map<std::string, std::string>;
  struct alignas(64) Shard {
    std::mutex mu;
    Map encoded;  // IV | plaintext -> encoded
    Map plain;    // IV | encoded -> plaintext
  };
  static std::string key(const DirIv& iv, std::string_view name);
  Shard& shard_of(const std::string& key);
  static std::optional<std::string> find(Shard& s, Map Shard::*map, const std::string& key);
  static void put(Shard& s, Map Shard::*map, std::string key, const std::string& value);
  std::array<Shard, kShards> shards_;
};

}  // namespace gcfs
