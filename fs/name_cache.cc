#include "fs/name_cache.h"

#include <functional>

namespace gcfs {

std::string NameCache::key(const DirIv& iv, std::string_view name) {
  std::string k(reinterpret_cast<const char*>(iv.data()), iv.size());
  k.append(name);
  return k;
}

NameCache::Shard& NameCache::shard_of(const std::string& key) {
  return shards_[std::hash<std::string>{}(key) % kShards];
}

std::optional<std::string> NameCache::find(Shard& s, Map Shard::*map, const std::string& key) {
  std::lock_guard lk(s.mu);
  auto it = (s.*map).find(key);
  if (it == (s.*map).end()) return std::nullopt;
  return it->second;
}

void NameCache::put(Shard& s, Map Shard::*map, std::string key, const std::string& value) {
  std::lock_guard lk(s.mu);
  Map& m = s.*map;
  if (m.size() >= kPerShard) m.clear();  // bounded: start over rather than track ages
  m.emplace(std::move(key), value);
}

std::optional<std::string> NameCache::find_encoded(const DirIv& iv, std::string_view plain) {
  const std::string k = key(iv, plain);
  return find(shard_of(k), &Shard::encoded, k);
}

void NameCache::put_encoded(const DirIv& iv, std::string_view plain, const std::string& encoded) {
  std::string k = key(iv, plain);
  Shard& s = shard_of(k);
  put(s, &Shard::encoded, std::move(k), encoded);
}

std::optional<std::string> NameCache::find_plain(const DirIv& iv, std::string_view encoded) {
  const std::string k = key(iv, encoded);
  return find(shard_of(k), &Shard::plain, k);
}

void NameCache::put_plain(const DirIv& iv, std::string_view encoded, const std::string& plain) {
  std::string k = key(iv, encoded);
  Shard& s = shard_of(k);
  put(s, &Shard::plain, std::move(k), plain);
}

}  // namespace gcfs
