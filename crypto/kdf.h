// Key derivation: scrypt turns the password into the key-wrapping key; HKDF-SHA256 turns the
// master key into independent subkeys (per-file content keys, the names key).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "crypto/secret.h"

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
// at every open and create). OpenSSL 3.0's own HKDF fetches HMAC and SHA-256 by name in every
// derivation (EVP_Q_mac), which was 10% of the daemon's time reading a tree of small files on the
// H100 machine. Here the two steps of RFC 5869 run on HMAC contexts fetched and set up once and
// reused (OpenSSL's HMAC; the same output as hkdf_sha256, which the tests check): about 0.8 us a
// key instead of 1.7 on the development VM, and no lock shared by every thread. Safe to share
// between threads; the keys it holds are wiped with it.
class SaltedHkdf {
 public:
  SaltedHkdf(std::span<const std::uint8_t> key, std::string_view info);
  ~SaltedHkdf();
  SaltedHkdf(const SaltedHkdf&) = delete;
  SaltedHkdf& operator=(const SaltedHkdf&) = delete;

  // out: at most 255 * 32 bytes (RFC 5869's limit for SHA-256).
  void derive(std::span<const std::uint8_t> salt, std::span<std::uint8_t> out) const;

 private:
  struct Slot;
  // Contexts taken by the calling thread's slot first (threads get slots in turn), another free
  // one when that is busy, so threads seldom wait on one another.
  static constexpr std::size_t kSlots = 16;
  SecretBytes key_;
  std::vector<std::uint8_t> info_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace gcfs
