#include "crypto/hmac_sha256.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <stdexcept>

namespace gcfs {
namespace {

EVP_MAC* hmac_algorithm() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);  // never freed: shared, immutable
  if (!mac) throw std::runtime_error("OpenSSL has no HMAC");
  return mac;
}

[[noreturn]] void failed() { throw std::runtime_error("HMAC-SHA256 failed"); }

}  // namespace

HmacSha256::HmacSha256(std::span<const std::uint8_t> key) : ctx_(EVP_MAC_CTX_new(hmac_algorithm())) {
  char digest_name[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                               OSSL_PARAM_construct_end()};
  if (!ctx_ || EVP_MAC_init(ctx_, key.data(), key.size(), params) != 1) {
    EVP_MAC_CTX_free(ctx_);
    failed();
  }
}

// EVP_MAC_CTX_free cleanses the HMAC state (the key's pads) before freeing it.
HmacSha256::~HmacSha256() { EVP_MAC_CTX_free(ctx_); }

HmacSha256 HmacSha256::clone() const {
  EVP_MAC_CTX* c = EVP_MAC_CTX_dup(ctx_);
  if (!c) failed();
  return HmacSha256(c);
}

void HmacSha256::restart() {
  // A null key re-initialises the context with the key it holds (OpenSSL's HMAC provider).
  if (EVP_MAC_init(ctx_, nullptr, 0, nullptr) != 1) failed();
}

void HmacSha256::update(const void* data, std::size_t n) {
  if (EVP_MAC_update(ctx_, static_cast<const unsigned char*>(data), n) != 1) failed();
}

void HmacSha256::finish(std::uint8_t* out) {
  std::size_t len = 0;
  if (EVP_MAC_final(ctx_, out, &len, kHmacSha256Bytes) != 1 || len != kHmacSha256Bytes) failed();
}

HmacSha256Digest hmac_sha256(std::span<const std::uint8_t> key,
                             std::initializer_list<std::span<const std::uint8_t>> parts) {
  HmacSha256 mac(key);
  for (auto p : parts) mac.update(p);
  return mac.finish();
}

bool tags_equal(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

}  // namespace gcfs
