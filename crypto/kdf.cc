#include "crypto/kdf.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
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

// An algorithm fetched once for the process: the provider lookup costs more than a derivation.
// One instantiation per algorithm type, each used for one name.
template <typename T, T* (*Fetch)(OSSL_LIB_CTX*, const char*, const char*), void (*Free)(T*)>
T* fetched_once(const char* name) {
  static const std::unique_ptr<T, decltype(Free)> algorithm(Fetch(nullptr, name, nullptr), Free);
  if (!algorithm) throw std::runtime_error(std::string("OpenSSL has no ") + name);
  return algorithm.get();
}

EVP_KDF* hkdf() { return fetched_once<EVP_KDF, EVP_KDF_fetch, EVP_KDF_free>("HKDF"); }
// What OpenSSL's HKDF fetches again in every derivation (SaltedHkdf avoids that).
EVP_MAC* hmac() { return fetched_once<EVP_MAC, EVP_MAC_fetch, EVP_MAC_free>("HMAC"); }

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

namespace {

constexpr std::size_t kSha256Bytes = 32;

void hmac_step(int ok) {
  if (ok != 1) throw std::runtime_error("HKDF-SHA256 derivation failed (HMAC)");
}

}  // namespace

struct SaltedHkdf::Slot {
  alignas(64) std::mutex mu;
  EVP_MAC_CTX* ctx = nullptr;  // HMAC-SHA256, keyed anew for each step
  ~Slot() { EVP_MAC_CTX_free(ctx); }  // wipes the last key it held
};

SaltedHkdf::SaltedHkdf(std::span<const std::uint8_t> key, std::string_view info)
    : key_(key.begin(), key.end()), info_(info.begin(), info.end()), slots_(new Slot[kSlots]) {
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  for (std::size_t i = 0; i < kSlots; ++i) {
    slots_[i].ctx = EVP_MAC_CTX_new(hmac());
    if (!slots_[i].ctx || EVP_MAC_CTX_set_params(slots_[i].ctx, params) != 1)
      throw std::runtime_error("HKDF-SHA256 setup failed");
  }
}

SaltedHkdf::~SaltedHkdf() = default;

void SaltedHkdf::derive(std::span<const std::uint8_t> salt, std::span<std::uint8_t> out) const {
  if (out.size() > 255 * kSha256Bytes) throw std::invalid_argument("HKDF-SHA256: at most 8160 bytes");
  static std::atomic<std::size_t> next_slot{0};
  thread_local const std::size_t mine = next_slot.fetch_add(1, std::memory_order_relaxed) % kSlots;
  std::size_t at = mine;
  std::unique_lock lk(slots_[at].mu, std::try_to_lock);
  for (std::size_t i = 1; !lk.owns_lock() && i < kSlots; ++i) {
    at = (mine + i) % kSlots;
    lk = std::unique_lock(slots_[at].mu, std::try_to_lock);
  }
  if (!lk.owns_lock()) {
    at = mine;
    lk = std::unique_lock(slots_[at].mu);
  }
  EVP_MAC_CTX* ctx = slots_[at].ctx;
  // Extract: PRK = HMAC(salt, key); no salt means HashLen zero bytes (RFC 5869, 2.2).
  static const std::uint8_t kNoSalt[kSha256Bytes] = {};
  const std::span<const std::uint8_t> s = salt.empty() ? std::span<const std::uint8_t>(kNoSalt) : salt;
  struct Wiped {  // the PRK and the last block, wiped on every way out (an HMAC step may throw)
    std::uint8_t prk[kSha256Bytes];
    std::uint8_t t[kSha256Bytes];
    ~Wiped() { OPENSSL_cleanse(this, sizeof *this); }
  } w;
  std::uint8_t* prk = w.prk;
  std::uint8_t* t = w.t;
  std::size_t len = 0;
  hmac_step(EVP_MAC_init(ctx, s.data(), s.size(), nullptr));
  hmac_step(EVP_MAC_update(ctx, key_.data(), key_.size()));
  hmac_step(EVP_MAC_final(ctx, prk, &len, kSha256Bytes));
  // Expand: T(i) = HMAC(PRK, T(i-1) | info | i), the first bytes of T(1) | T(2) | ... as output.
  hmac_step(EVP_MAC_init(ctx, prk, kSha256Bytes, nullptr));
  std::size_t done = 0;
  for (std::uint8_t i = 1; done < out.size(); ++i) {
    if (i > 1) {  // again with the PRK, after the block before
      hmac_step(EVP_MAC_init(ctx, nullptr, 0, nullptr));
      hmac_step(EVP_MAC_update(ctx, t, kSha256Bytes));
    }
    hmac_step(EVP_MAC_update(ctx, info_.data(), info_.size()));
    hmac_step(EVP_MAC_update(ctx, &i, 1));
    hmac_step(EVP_MAC_final(ctx, t, &len, kSha256Bytes));
    const std::size_t n = std::min(kSha256Bytes, out.size() - done);
    std::memcpy(out.data() + done, t, n);
    done += n;
  }
}

}  // namespace gcfs
