// AES-256-GCM for one chunk through OpenSSL's EVP interface: the implementation for processors and
// platforms where intel-ipsec-mb has no faster path (see crypto/gcm_impl.h).
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <stdexcept>

#include "crypto/evp_handles.h"
#include "crypto/gcm_impl.h"

namespace gcfs {
namespace {

const EVP_CIPHER* aes256gcm() {
  static const FetchedCipher cipher = fetch_cipher("AES-256-GCM");
  return cipher.get();
}

// One context per thread and direction, reused for every chunk. It keeps its key schedule while
// consecutive chunks use the same key (a request's chunks all belong to one file), so that only
// the nonce is set per chunk: a full init with the key costs about half a microsecond, as much as
// opening a fifth of a 4 KiB chunk. The key it holds is compared in constant time and wiped with
// the thread.
struct KeyedCtx {
  CipherCtx ctx = new_cipher_ctx();
  std::array<std::uint8_t, kChunkKeyBytes> key{};
  bool keyed = false;
  KeyedCtx() = default;
  KeyedCtx(const KeyedCtx&) = delete;
  KeyedCtx& operator=(const KeyedCtx&) = delete;
  ~KeyedCtx() { OPENSSL_cleanse(key.data(), key.size()); }
};

void check(int rc, const char* what) {
  if (rc != 1) throw std::runtime_error(std::string("cpu engine: AES-256-GCM ") + what + " failed");
}

// params: handed to the init with the nonce (open passes the expected tag there; see gcm_openssl_open).
EVP_CIPHER_CTX* begin(const ChunkOp& op, int encrypt, const OSSL_PARAM* params = nullptr) {
  if (!op.key) throw std::invalid_argument("cpu engine: chunk op without a key");
  if (op.len > INT_MAX || op.aad_len > kMaxChunkAadBytes) throw std::invalid_argument("cpu engine: chunk op too large");
  thread_local KeyedCtx contexts[2];
  KeyedCtx& k = contexts[encrypt ? 1 : 0];
  EVP_CIPHER_CTX* ctx = k.ctx.get();
  if (k.keyed && CRYPTO_memcmp(k.key.data(), op.key->data(), kChunkKeyBytes) == 0) {
    check(EVP_CipherInit_ex2(ctx, nullptr, nullptr, op.nonce.data(), encrypt, params), "init");
  } else {
    k.keyed = false;  // until the init with the new key has succeeded
    check(EVP_CipherInit_ex2(ctx, aes256gcm(), op.key->data(), op.nonce.data(), encrypt, params), "init");
    std::copy_n(op.key->data(), kChunkKeyBytes, k.key.begin());
    k.keyed = true;
  }
  int outl = 0;
  if (op.aad_len) check(EVP_CipherUpdate(ctx, nullptr, &outl, op.aad, static_cast<int>(op.aad_len)), "AAD");
  return ctx;
}

}  // namespace

void gcm_openssl_seal(ChunkOp& op) {
  EVP_CIPHER_CTX* ctx = begin(op, 1);
  int outl = 0;
  if (op.len) check(EVP_EncryptUpdate(ctx, op.out, &outl, op.in, static_cast<int>(op.len)), "encrypt");
  int fin = 0;
  check(EVP_EncryptFinal_ex(ctx, op.out + outl, &fin), "finish");
  check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, kChunkTagBytes, op.tag.data()), "get tag");
  op.ok = true;
}

void gcm_openssl_open(ChunkOp& op) {
  // The expected tag goes in with the nonce, in the init's parameters, rather than by a later
  // EVP_CTRL_AEAD_SET_TAG, which OpenSSL 3.0 turns into a parameter array and a second call into
  // the provider for every chunk (4 KiB chunks on one thread, this VM: 2% faster opens). The GCM
  // provider takes the tag at any time before the final call.
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, op.tag.data(), kChunkTagBytes),
      OSSL_PARAM_construct_end()};
  EVP_CIPHER_CTX* ctx = begin(op, 0, params);
  int outl = 0;
  if (op.len) check(EVP_DecryptUpdate(ctx, op.out, &outl, op.in, static_cast<int>(op.len)), "decrypt");
  int fin = 0;
  op.ok = EVP_DecryptFinal_ex(ctx, op.out + outl, &fin) == 1;
  if (!op.ok && op.len) std::memset(op.out, 0, op.len);
}

}  // namespace gcfs
