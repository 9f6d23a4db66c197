// HMAC-SHA256, written once for everything that authenticates or derives with it: the crash
// journal's records (fs/journal_record.h) and reverse mode's deterministic IDs and nonces
// (fs/reverse_derivation.h), over OpenSSL's EVP_MAC.
//
// Keying is the expensive part (the digest looked up by name, the key hashed into the pads): an
// HmacSha256 is keyed once and then digests any number of messages, each begun with restart().
// The key lives only inside OpenSSL's context, which EVP_MAC_CTX_free cleanses before freeing;
// no copy of it is kept here.
#pragma once

#include <openssl/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

namespace gcfs {

constexpr std::size_t kHmacSha256Bytes = 32;
using HmacSha256Digest = std::array<std::uint8_t, kHmacSha256Bytes>;

class HmacSha256 {
 public:
  // Keyed and ready for a first message. Throws std::runtime_error when OpenSSL cannot.
  explicit HmacSha256(std::span<const std::uint8_t> key);
  ~HmacSha256();
  HmacSha256(HmacSha256&& o) noexcept : ctx_(o.ctx_) { o.ctx_ = nullptr; }
  HmacSha256& operator=(HmacSha256&&) = delete;
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  // Another context with the same key, for another thread: cheaper than keying one again.
  HmacSha256 clone() const;

  // Starts a new message under the same key, forgetting any message begun.
  void restart();
  void update(const void* data, std::size_t n);
  void update(std::span<const std::uint8_t> bytes) { update(bytes.data(), bytes.size()); }
  // Ends the message: its tag into out (kHmacSha256Bytes). The next message needs restart().
  void finish(std::uint8_t* out);
  HmacSha256Digest finish() {
    HmacSha256Digest d{};
    finish(d.data());
    return d;
  }

 private:
  explicit HmacSha256(EVP_MAC_CTX* ctx) : ctx_(ctx) {}
  EVP_MAC_CTX* ctx_;
};

// One message in one call: HMAC-SHA256 under key of the parts back to back.
HmacSha256Digest hmac_sha256(std::span<const std::uint8_t> key,
                             std::initializer_list<std::span<const std::uint8_t>> parts);

// Whether two tags are equal, in time that does not depend on where they differ (CRYPTO_memcmp):
// a tag compared with an early exit tells an attacker how many of its leading bytes were right.
bool tags_equal(const std::uint8_t* a, const std::uint8_t* b, std::size_t n);

}  // namespace gcfs
