// Shared by the fuzz targets: a fixed master key (fuzzing needs reproducible keys, and none of this
// is a secret), and seed corpora written on request.
//
// Seeds that must be encrypted under the fixed key (names, chunks) cannot be checked in as plain
// files without going stale when the format changes, so each target writes its own: run the target
// with GCFS_FUZZ_WRITE_SEEDS=DIR and it fills DIR before fuzzing starts (scripts/fuzz.sh does this).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "crypto/key_ring.h"

namespace gcfs::fuzz {

inline const KeyRing& fixed_keys() {
  static const KeyRing keys = [] {
    std::array<std::uint8_t, kMasterKeyBytes> master{};
    for (std::size_t i = 0; i < master.size(); ++i) master[i] = static_cast<std::uint8_t>(0xA5 ^ (i * 29));
    return KeyRing(master);
  }();
  return keys;
}

// Stops the fuzzer with a message: a broken property is as much a finding as a crash.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

inline const char* seed_dir() { return std::getenv("GCFS_FUZZ_WRITE_SEEDS"); }

inline void write_seed(const std::string& name, std::span<const std::uint8_t> bytes) {
  const char* dir = seed_dir();
  if (!dir) return;
  const std::string path = std::string(dir) + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    std::exit(1);
  }
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

inline void write_seed(const std::string& name, const std::string& text) {
  write_seed(name, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

}  // namespace gcfs::fuzz
