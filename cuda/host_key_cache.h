// The gpu engine's host copy of each key's GPU material (round keys and GHASH tables, built on the
// host from the shared math and uploaded with the batches that use it), and the count that keeps a
// key used once from paying for its tables (GpuOptions::cold_key_cpu_bytes). Internal to cuda/.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "crypto/chunk_engine.h"
#include "crypto/secret.h"
#include "cuda/gcm_layout.h"

namespace gcfs::gpu {

struct KeyHash {
  std::size_t operator()(const ChunkKey& k) const noexcept {
    std::size_t h;
    std::memcpy(&h, k.data(), sizeof h);  // keys are uniformly random
    return h;
  }
};

// Key material per key, built once: round keys and GHASH tables in locked, wiped memory.
class HostKeyCache {
 public:
  bool has(const ChunkKey& key) {
    std::lock_guard lock(mu_);
    return map_.count(key) != 0;
  }
  // Counts a batch with a key not prepared yet; true once the key has come back `needed` times.
  bool seen_enough(const ChunkKey& key, unsigned needed) {
    std::lock_guard lock(mu_);
    if (seen_.size() >= 4 * kCapacity) seen_.clear();  // bounded; a key starts counting again
    return ++seen_[key] >= needed;
  }

  std::shared_ptr<const SecretBytes> get(const ChunkKey& key) {
    {
      std::lock_guard lock(mu_);
      if (auto it = map_.find(key); it != map_.end()) return it->second;
    }
    auto blob = std::make_shared<SecretBytes>(sizeof(KeyBlob));
    build_key_blob(key.data(), *reinterpret_cast<KeyBlob*>(blob->data()));
    std::lock_guard lock(mu_);
    if (map_.size() >= kCapacity) map_.clear();  // rare: more live files than this; rebuilt on demand
    map_.emplace(key, blob);
    return blob;
  }

 private:
  static constexpr std::size_t kCapacity = 1024;
  std::mutex mu_;
  std::unordered_map<ChunkKey, std::shared_ptr<const SecretBytes>, KeyHash> map_;
  std::unordered_map<ChunkKey, unsigned, KeyHash> seen_;  // batches of keys not prepared yet
};

}  // namespace gcfs::gpu
