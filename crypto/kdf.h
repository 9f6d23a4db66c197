// Key derivation: scrypt turns the password into the key-wrapping key; HKDF-SHA256 turns the
// master key into independent subkeys (per-file content keys, the names key).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>

#include "crypto/secret.h"

struct evp_kdf_ctx_st;  // EVP_KDF_CTX (openssl/types.h)

namespace gcfs {

struct ScryptParams {
  int log_n = 17;  // N = 2^17: about 128 MiB and a fraction of a second, as gocryptfs defaults to
  int r = 8;
  int p = 1;
};

SecretBytes scrypt(std::string_view password, std::span<const std::uint8_t> salt,
                   const ScryptParams& params, std::size_t out_len);

SecretBytes hkdf_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> salt,
                        std::span<const std::uint8_t> info, std::size_t out_len);

// hkdf_sha256 with a fixed key and info, the salt given per call (a file's content key, derived
// at every open). OpenSSL's context, built from the key and the digest's name, is set up once:
// a derivation then costs 1.6 us instead of 2.8 on the development VM. Safe to share between
// threads; the key it holds is wiped with it.
class SaltedHkdf {
 public:
  SaltedHkdf(std::span<const std::uint8_t> key, std::string_view info);
  ~SaltedHkdf();
  SaltedHkdf(const SaltedHkdf&) = delete;
  SaltedHkdf& operator=(const SaltedHkdf&) = delete;

  void derive(std::span<const std::uint8_t> salt, std::span<std::uint8_t> out) const;

 private:
  mutable std::mutex mu_;
  ::evp_kdf_ctx_st* ctx_ = nullptr;  // OpenSSL's EVP_KDF_CTX
};

}  // namespace gcfs
