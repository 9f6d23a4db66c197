#include "fs/reverse_derivation.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <stdexcept>

namespace gcfs {
namespace {

using Digest = std::array<std::uint8_t, 32>;

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// HMAC-SHA256 of the label, a zero byte, then the parts back to back.
Digest hmac(const ReverseKey& key, std::string_view label, std::initializer_list<std::span<const std::uint8_t>> parts) {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);  // never freed: shared, immutable
  if (!mac) throw std::runtime_error("OpenSSL has no HMAC");
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(EVP_MAC_CTX_new(mac), EVP_MAC_CTX_free);
  char digest_name[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                               OSSL_PARAM_construct_end()};
  const std::uint8_t zero = 0;
  bool ok = ctx && EVP_MAC_init(ctx.get(), key.bytes.data(), key.bytes.size(), params) == 1 &&
            EVP_MAC_update(ctx.get(), bytes_of(label).data(), label.size()) == 1 &&
            EVP_MAC_update(ctx.get(), &zero, 1) == 1;
  for (auto p : parts) ok = ok && EVP_MAC_update(ctx.get(), p.data(), p.size()) == 1;
  Digest d{};
  std::size_t len = 0;
  ok = ok && EVP_MAC_final(ctx.get(), d.data(), &len, d.size()) == 1 && len == d.size();
  if (!ok) throw std::runtime_error("HMAC-SHA256 failed");
  return d;
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
