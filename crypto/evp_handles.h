// RAII owners for OpenSSL EVP objects.
#pragma once

#include <openssl/evp.h>

#include <memory>
#include <stdexcept>

namespace gcfs {

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

inline CipherCtx new_cipher_ctx() {
  CipherCtx c(EVP_CIPHER_CTX_new());
  if (!c) throw std::bad_alloc();
  return c;
}

struct CipherFree {
  void operator()(EVP_CIPHER* c) const { EVP_CIPHER_free(c); }
};
using FetchedCipher = std::unique_ptr<EVP_CIPHER, CipherFree>;

// Fetching once and reusing avoids the provider lookup that EVP_aes_256_gcm() repeats per init.
inline FetchedCipher fetch_cipher(const char* name) {
  FetchedCipher c(EVP_CIPHER_fetch(nullptr, name, nullptr));
  if (!c) throw std::runtime_error(std::string("OpenSSL does not provide ") + name);
  return c;
}

}  // namespace gcfs
