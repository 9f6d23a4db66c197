#include "crypto/key_ring.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include "crypto/kdf.h"

namespace gcfs {
namespace {

std::span<const std::uint8_t> label(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

template <std::size_t N>
SecretKey<N> derive(std::span<const std::uint8_t> master, std::span<const std::uint8_t> salt, std::string_view info) {
  SecretBytes k = hkdf_sha256(master, salt, label(info), N);
  SecretKey<N> out;
  std::copy(k.begin(), k.end(), out.bytes.begin());
  return out;
}

constexpr std::string_view kContentInfo = "gpucryptfs v1 content AES-256-GCM";

}  // namespace

KeyRing::KeyRing(std::span<const std::uint8_t> master_key) {
  if (master_key.size() != kMasterKeyBytes) throw std::invalid_argument("the master key must be 32 bytes");
  std::copy(master_key.begin(), master_key.end(), master_.bytes.begin());
  names_ = derive<64>(master_.bytes, {}, "gpucryptfs v1 names AES-256-SIV");
  blob_ = derive<32>(master_.bytes, {}, "gpucryptfs v1 metadata AES-256-GCM");
  journal_ = derive<32>(master_.bytes, {}, "gpucryptfs v1 journal records HMAC-SHA256");
  reverse_ = derive<32>(master_.bytes, {}, "gpucryptfs v1 reverse derivations HMAC-SHA256");
  content_kdf_ = std::make_unique<SaltedHkdf>(master_.bytes, kContentInfo);
}

ChunkKey KeyRing::content_key(const FileId& file_id) const {
  // HKDF(master, salt = file ID, info = kContentInfo), as derive<> would give it.
  ChunkKey key;
  content_kdf_->derive(file_id, key.bytes);
  return key;
}

}  // namespace gcfs
