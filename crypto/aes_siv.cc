#include "crypto/aes_siv.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
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

// A context keyed once per thread, direction and key, copied for each operation: OpenSSL's SIV
// init fetches CMAC and both ciphers and runs their key schedules every time, about 24 us per
// name against 10 us for the copy (names are sealed or opened on every lookup, create, unlink and
// listed entry). Two keys per direction, since a re-key opens every name under the new key and
// then the old one: with one slot each call re-keyed the context (half of a re-key's CPU on
// small files). The keys it holds are compared in constant time and wiped with the thread.
struct KeyedSiv {
  CipherCtx keyed = new_cipher_ctx();
  CipherCtx work = new_cipher_ctx();
  std::array<std::uint8_t, 64> key{};
  std::size_t key_len = 0;
  KeyedSiv() = default;
  KeyedSiv(const KeyedSiv&) = delete;
  KeyedSiv& operator=(const KeyedSiv&) = delete;
  ~KeyedSiv() { OPENSSL_cleanse(key.data(), key.size()); }
  bool holds(std::span<const std::uint8_t> k) const {
    return key_len == k.size() && CRYPTO_memcmp(key.data(), k.data(), k.size()) == 0;
  }
};

constexpr int kSivKeysPerDirection = 2;

EVP_CIPHER_CTX* siv_context(std::span<const std::uint8_t> key, int encrypt) {
  const EVP_CIPHER* cipher = siv_cipher(key.size());  // checks the key's size
  thread_local KeyedSiv slots[2][kSivKeysPerDirection];
  thread_local int last_used[2] = {0, 0};
  KeyedSiv* row = slots[encrypt ? 1 : 0];
  int& last = last_used[encrypt ? 1 : 0];
  int pick = -1;
  for (int i = 0; i < kSivKeysPerDirection && pick < 0; ++i)
    if (row[i].holds(key)) pick = i;
  if (pick < 0) {  // the slot not used last
    pick = (last + 1) % kSivKeysPerDirection;
    KeyedSiv& s = row[pick];
    s.key_len = 0;  // until the init with the new key has succeeded
    check(EVP_CipherInit_ex2(s.keyed.get(), cipher, key.data(), nullptr, encrypt, nullptr), "init");
    std::copy(key.begin(), key.end(), s.key.begin());
    s.key_len = key.size();
  }
  last = pick;
  check(EVP_CIPHER_CTX_copy(row[pick].work.get(), row[pick].keyed.get()), "copy");
  return row[pick].work.get();
}

}  // namespace

std::vector<std::uint8_t> siv_encrypt(std::span<const std::uint8_t> key, std::span<const std::uint8_t> aad,
                                      std::span<const std::uint8_t> plaintext) {
  if (plaintext.size() > INT_MAX / 2) throw std::invalid_argument("AES-SIV: input too large");
  require_nonempty(aad, plaintext.size());
  EVP_CIPHER_CTX* ctx = siv_context(key, 1);
  int outl = 0;
  check(EVP_EncryptUpdate(ctx, nullptr, &outl, aad.data(), static_cast<int>(aad.size())), "AAD");
  std::vector<std::uint8_t> out(kSivTagBytes + plaintext.size());
  // OpenSSL's SIV takes the whole plaintext in one update call.
  check(EVP_EncryptUpdate(ctx, out.data() + kSivTagBytes, &outl, plaintext.data(), static_cast<int>(plaintext.size())),
        "encrypt");
  int fin = 0;
  check(EVP_EncryptFinal_ex(ctx, out.data() + kSivTagBytes + outl, &fin), "finish");
  check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, kSivTagBytes, out.data()), "get tag");
  return out;
}

std::optional<std::vector<std::uint8_t>> siv_decrypt(std::span<const std::uint8_t> key,
                                                     std::span<const std::uint8_t> aad,
                                                     std::span<const std::uint8_t> sealed) {
  if (sealed.size() < kSivTagBytes || sealed.size() > INT_MAX / 2) return std::nullopt;
  require_nonempty(aad, 1);
  if (sealed.size() == kSivTagBytes) return std::nullopt;  // nothing we seal is empty
  EVP_CIPHER_CTX* ctx = siv_context(key, 0);
  check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, kSivTagBytes, const_cast<std::uint8_t*>(sealed.data())),
        "set tag");
  int outl = 0;
  check(EVP_DecryptUpdate(ctx, nullptr, &outl, aad.data(), static_cast<int>(aad.size())), "AAD");
  std::vector<std::uint8_t> out(sealed.size() - kSivTagBytes);
  if (EVP_DecryptUpdate(ctx, out.data(), &outl, sealed.data() + kSivTagBytes, static_cast<int>(out.size())) != 1)
    return std::nullopt;
  int fin = 0;
  if (EVP_DecryptFinal_ex(ctx, out.data() + outl, &fin) != 1) return std::nullopt;
  return out;
}

}  // namespace gcfs
