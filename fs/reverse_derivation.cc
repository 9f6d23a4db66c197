#include "fs/reverse_derivation.h"

#include <algorithm>
#include <initializer_list>

#include "crypto/hmac_sha256.h"

namespace gcfs {
namespace {

using Digest = HmacSha256Digest;

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// HMAC-SHA256 of the label, a zero byte, then the parts back to back.
Digest hmac(const ReverseKey& key, std::string_view label, std::initializer_list<std::span<const std::uint8_t>> parts) {
  HmacSha256 mac(key.bytes);
  const std::uint8_t zero = 0;
  mac.update(bytes_of(label));
  mac.update(&zero, 1);
  for (auto p : parts) mac.update(p);
  return mac.finish();
}

template <std::size_t N>
std::array<std::uint8_t, N> first(const Digest& d) {
  std::array<std::uint8_t, N> out{};
  std::copy_n(d.begin(), N, out.begin());
  return out;
}

}  // namespace

DirIv ReverseDerivation::dir_iv(std::string_view rel_path) const {
  return first<kDirIvBytes>(hmac(key_, "dir iv", {bytes_of(rel_path)}));
}

FileId ReverseDerivation::file_id(std::string_view rel_path) const {
  return first<kFileIdBytes>(hmac(key_, "file id", {bytes_of(rel_path)}));
}

std::array<std::uint8_t, 12> ReverseDerivation::chunk_nonce(const FileId& id, std::uint64_t chunk,
                                                            std::span<const std::uint8_t> plaintext) const {
  std::array<std::uint8_t, 8> k{};
  for (int i = 0; i < 8; ++i) k[i] = static_cast<std::uint8_t>(chunk >> (56 - 8 * i));
  return first<12>(hmac(key_, "chunk", {id, k, plaintext}));
}

std::array<std::uint8_t, 12> ReverseDerivation::symlink_nonce(std::string_view rel_path, std::string_view target) const {
  const std::uint8_t zero = 0;
  return first<12>(hmac(key_, "symlink", {bytes_of(rel_path), {&zero, 1}, bytes_of(target)}));
}

}  // namespace gcfs
