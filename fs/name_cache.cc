#include "fs/name_cache.h"

#include <functional>
#include <vector>

namespace gcfs {

// The slots, and locks each guarding every kLocks-th slot.
struct NameCache::Table {
  static constexpr std::size_t kLocks = 64;
  std::vector<Slot> slots = std::vector<Slot>(kSlots);
  std::array<std::mutex, kLocks> locks;
};

NameCache::NameCache() : encoded_(std::make_unique<Table>()), plain_(std::make_unique<Table>()) {}
NameCache::~NameCache() = default;

std::uint64_t NameCache::hash_of(const DirIv& iv, std::string_view name) {
  const std::string_view iv_bytes(reinterpret_cast<const char*>(iv.data()), iv.size());
  const std::uint64_t h = std::hash<std::string_view>{}(name);
  return h ^ (std::hash<std::string_view>{}(iv_bytes) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

std::optional<std::string> NameCache::find(Table& t, const DirIv& iv, std::string_view key) {
  const std::uint64_t h = hash_of(iv, key);
  const std::size_t i = h % kSlots;
  std::lock_guard lk(t.locks[i % Table::kLocks]);
  const Slot& s = t.slots[i];
  if (!s.used || s.hash != h || s.iv != iv || s.key != key) return std::nullopt;
  return s.value;
}

void NameCache::put(Table& t, const DirIv& iv, std::string_view key, std::string_view value) {
  const std::uint64_t h = hash_of(iv, key);
  const std::size_t i = h % kSlots;
  std::lock_guard lk(t.locks[i % Table::kLocks]);
  Slot& s = t.slots[i];
  s.hash = h;
  s.used = true;
  s.iv = iv;
  s.key.assign(key);  // reuses the slot's storage once it has grown
  s.value.assign(value);
}

std::optional<std::string> NameCache::find_encoded(const DirIv& iv, std::string_view plain) {
  return find(*encoded_, iv, plain);
}

void NameCache::put_encoded(const DirIv& iv, std::string_view plain, std::string_view encoded) {
  put(*encoded_, iv, plain, encoded);
}

std::optional<std::string> NameCache::find_plain(const DirIv& iv, std::string_view encoded) {
  return find(*plain_, iv, encoded);
}

void NameCache::put_plain(const DirIv& iv, std::string_view encoded, std::string_view plain) {
  put(*plain_, iv, encoded, plain);
}

}  // namespace gcfs
