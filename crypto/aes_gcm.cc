#include "crypto/aes_gcm.h"

#include <openssl/evp.h>

#include <climits>
#include <stdexcept>

#include "crypto/evp_handles.h"
#include "crypto/secret.h"

namespace gcfs {
namespace {

const EVP_CIPHER* aes256gcm() {
  static const FetchedCipher cipher = fetch_cipher("AES-256-GCM");
  return cipher.get();
}

void check(int rc, const char* what) {
  if (rc != 1) throw std::runtime_error(std::string("AES-256-GCM: ") + what + " failed");
}

CipherCtx init(std::span<const std::uint8_t> key, std::span<const std::uint8_t> iv, bool encrypt) {
  if (key.size() != kGcmKeyBytes) throw std::invalid_argument("AES-256-GCM needs a 32-byte key");
  auto ctx = new_cipher_ctx();
  check(EVP_CipherInit_ex2(ctx.get(), aes256gcm(), nullptr, nullptr, encrypt, nullptr), "init");
  size_t ivlen = iv.size();
  OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t("ivlen", &ivlen), OSSL_PARAM_construct_end()};
  check(EVP_CIPHER_CTX_set_params(ctx.get(), params), "set IV length");
  check(EVP_CipherInit_ex2(ctx.get(), nullptr, key.data(), iv.data(), encrypt, nullptr), "key setup");
  return ctx;
}

void update_aad(EVP_CIPHER_CTX* ctx, std::span<const std::uint8_t> aad) {
  int outl = 0;
  if (!aad.empty()) check(EVP_CipherUpdate(ctx, nullptr, &outl, aad.data(), static_cast<int>(aad.size())), "AAD");
}

}  // namespace

std::array<std::uint8_t, kGcmTagBytes> gcm_seal(std::span<const std::uint8_t> key,
                                                std::span<const std::uint8_t> iv,
                                                std::span<const std::uint8_t> aad,
                                                std::span<const std::uint8_t> in, std::uint8_t* out) {
  if (in.size() > INT_MAX) throw std::invalid_argument("gcm_seal: message too large");
  auto ctx = init(key, iv, true);
  update_aad(ctx.get(), aad);
  int outl = 0;
  if (!in.empty()) check(EVP_EncryptUpdate(ctx.get(), out, &outl, in.data(), static_cast<int>(in.size())), "encrypt");
  check(EVP_EncryptFinal_ex(ctx.get(), out + outl, &outl), "finish");
  std::array<std::uint8_t, kGcmTagBytes> tag{};
  check(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, kGcmTagBytes, tag.data()), "get tag");
  return tag;
}

bool gcm_open(std::span<const std::uint8_t> key, std::span<const std::uint8_t> iv,
              std::span<const std::uint8_t> aad, std::span<const std::uint8_t> in,
              std::span<const std::uint8_t> tag, std::uint8_t* out) {
  if (in.size() > INT_MAX) throw std::invalid_argument("gcm_open: message too large");
  if (tag.size() != kGcmTagBytes) {
    // Same outcome as a mismatching tag: callers rely on out never holding stale or partial data.
    if (!in.empty()) secure_wipe(out, in.size());
    return false;
  }
  auto ctx = init(key, iv, false);
  update_aad(ctx.get(), aad);
  int outl = 0;
  if (!in.empty()) check(EVP_DecryptUpdate(ctx.get(), out, &outl, in.data(), static_cast<int>(in.size())), "decrypt");
  check(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, kGcmTagBytes, const_cast<std::uint8_t*>(tag.data())), "set tag");
  int fin = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), out + outl, &fin) != 1) {
    secure_wipe(out, in.size());
    return false;
  }
  return true;
}

}  // namespace gcfs
