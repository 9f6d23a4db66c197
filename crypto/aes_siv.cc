#include "crypto/aes_siv.h"

#include <openssl/evp.h>

#include <climits>
#include <stdexcept>

#include "crypto/evp_handles.h"

namespace gcfs {
namespace {

const EVP_CIPHER* siv_cipher(std::size_t key_len) {
  static const FetchedCipher siv128 = fetch_cipher("AES-128-SIV");
  static const FetchedCipher siv256 = fetch_cipher("AES-256-SIV");
  if (key_len == 32) return siv128.get();
  if (key_len == 64) return siv256.get();
  throw std::invalid_argument("AES-SIV needs a 32- or 64-byte key");
}

void check(int rc, const char* what) {
  if (rc != 1) throw std::runtime_error(std::string("AES-SIV: ") + what + " failed");
}

// OpenSSL's SIV treats an update with no input as "finish" and skips an empty message, so an
// empty AAD or plaintext would fail deep inside (or be taken for another call); say so up front.
void require_nonempty(std::span<const std::uint8_t> aad, std::size_t plaintext_len) {
  if (aad.empty()) throw std::invalid_argument("AES-SIV: the associated data must not be empty");
  if (plaintext_len == 0) throw std::invalid_argument("AES-SIV: OpenSSL cannot seal an empty message");
}

}  // namespace

std::vector<std::uint8_t> siv_encrypt(std::span<const std::uint8_t> key, std::span<const std::uint8_t> aad,
                                      std::span<const std::uint8_t> plaintext) {
  if (plaintext.size() > INT_MAX / 2) throw std::invalid_argument("AES-SIV: input too large");
  require_nonempty(aad, plaintext.size());
  auto ctx = new_cipher_ctx();
  check(EVP_EncryptInit_ex2(ctx.get(), siv_cipher(key.size()), key.data(), nullptr, nullptr), "init");
  int outl = 0;
  check(EVP_EncryptUpdate(ctx.get(), nullptr, &outl, aad.data(), static_cast<int>(aad.size())), "AAD");
  std::vector<std::uint8_t> out(kSivTagBytes + plaintext.size());
  // OpenSSL's SIV takes the whole plaintext in one update call.
  check(EVP_EncryptUpdate(ctx.get(), out.data() + kSivTagBytes, &outl, plaintext.data(),
                          static_cast<int>(plaintext.size())), "encrypt");
  int fin = 0;
  check(EVP_EncryptFinal_ex(ctx.get(), out.data() + kSivTagBytes + outl, &fin), "finish");
  check(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, kSivTagBytes, out.data()), "get tag");
  return out;
}

std::optional<std::vector<std::uint8_t>> siv_decrypt(std::span<const std::uint8_t> key,
                                                     std::span<const std::uint8_t> aad,
                                                     std::span<const std::uint8_t> sealed) {
  if (sealed.size() < kSivTagBytes || sealed.size() > INT_MAX / 2) return std::nullopt;
  require_nonempty(aad, 1);
  if (sealed.size() == kSivTagBytes) return std::nullopt;  // nothing we seal is empty
  auto ctx = new_cipher_ctx();
  check(EVP_DecryptInit_ex2(ctx.get(), siv_cipher(key.size()), key.data(), nullptr, nullptr), "init");
  check(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, kSivTagBytes,
                            const_cast<std::uint8_t*>(sealed.data())), "set tag");
  int outl = 0;
  check(EVP_DecryptUpdate(ctx.get(), nullptr, &outl, aad.data(), static_cast<int>(aad.size())), "AAD");
  std::vector<std::uint8_t> out(sealed.size() - kSivTagBytes);
  if (EVP_DecryptUpdate(ctx.get(), out.data(), &outl, sealed.data() + kSivTagBytes,
                        static_cast<int>(out.size())) != 1)
    return std::nullopt;
  int fin = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), out.data() + outl, &fin) != 1) return std::nullopt;
  return out;
}

}  // namespace gcfs
