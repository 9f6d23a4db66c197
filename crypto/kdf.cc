#include "crypto/kdf.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace gcfs {

SecretBytes scrypt(std::string_view password, std::span<const std::uint8_t> salt,
                   const ScryptParams& params, std::size_t out_len) {
  if (params.log_n < 10 || params.log_n > 28)
    throw std::invalid_argument("scrypt log N must be between 10 and 28, got " + std::to_string(params.log_n));
  const std::uint64_t n = std::uint64_t{1} << params.log_n;
  // OpenSSL refuses parameters needing more than maxmem; allow what these parameters need.
  const std::uint64_t maxmem = 128ull * params.r * (n + params.p + 2) + (1ull << 20);
  SecretBytes out(out_len);
  if (EVP_PBE_scrypt(password.data(), password.size(), salt.data(), salt.size(), n,
                     static_cast<std::uint64_t>(params.r), static_cast<std::uint64_t>(params.p),
                     maxmem, out.data(), out.size()) != 1)
    throw std::runtime_error("scrypt failed (not enough memory for log N = " + std::to_string(params.log_n) + "?)");
  return out;
}

namespace {

// Fetched once: the provider lookup cost more than the derivation itself.
EVP_KDF* hkdf() {
  static const std::unique_ptr<EVP_KDF, decltype(&EVP_KDF_free)> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr),
                                                                      EVP_KDF_free);
  if (!kdf) throw std::runtime_error("OpenSSL has no HKDF");
  return kdf.get();
}

}  // namespace

SecretBytes hkdf_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> salt,
                        std::span<const std::uint8_t> info, std::size_t out_len) {
  std::unique_ptr<EVP_KDF_CTX, decltype(&EVP_KDF_CTX_free)> ctx(EVP_KDF_CTX_new(hkdf()), EVP_KDF_CTX_free);
  char digest[] = "SHA256";
  OSSL_PARAM params[5];
  int i = 0;
  params[i++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[i++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<std::uint8_t*>(key.data()), key.size());
  if (!salt.empty())
    params[i++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<std::uint8_t*>(salt.data()), salt.size());
  params[i++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<std::uint8_t*>(info.data()), info.size());
  params[i] = OSSL_PARAM_construct_end();
  SecretBytes out(out_len);
  if (!ctx || EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1)
    throw std::runtime_error("HKDF-SHA256 derivation failed");
  return out;
}

SaltedHkdf::SaltedHkdf(std::span<const std::uint8_t> key, std::string_view info) : ctx_(EVP_KDF_CTX_new(hkdf())) {
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<std::uint8_t*>(key.data()), key.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size()),
      OSSL_PARAM_construct_end()};
  if (!ctx_ || EVP_KDF_CTX_set_params(ctx_, params) != 1) {
    EVP_KDF_CTX_free(ctx_);  // wipes the key it was given
    throw std::runtime_error("HKDF-SHA256 setup failed");
  }
}

SaltedHkdf::~SaltedHkdf() { EVP_KDF_CTX_free(ctx_); }

void SaltedHkdf::derive(std::span<const std::uint8_t> salt, std::span<std::uint8_t> out) const {
  // Only the salt changes: OpenSSL replaces it and keeps the key, the info and the digest.
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<std::uint8_t*>(salt.data()), salt.size()),
      OSSL_PARAM_construct_end()};
  std::lock_guard lk(mu_);
  if (EVP_KDF_derive(ctx_, out.data(), out.size(), params) != 1) throw std::runtime_error("HKDF-SHA256 derivation failed");
}

}  // namespace gcfs
