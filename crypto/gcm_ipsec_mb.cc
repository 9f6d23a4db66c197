// AES-256-GCM for one chunk through intel-ipsec-mb's direct GCM API (x86-64 only; built where CMake
// found the library). On a processor with VAES, VPCLMULQDQ and AVX-512 one core seals 4 KiB chunks
// at three to four times OpenSSL 3.0's rate and 64 KiB ones at over twice it: OpenSSL's per-call
// overhead (the EVP layer, the provider) weighs most on small chunks, and ipsec-mb's VAES code
// works on four blocks per instruction.
// Same ciphertext and tags as OpenSSL's: it is the same GCM (NIST SP 800-38D, 96-bit IV).
#include <intel-ipsec-mb.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

#include "crypto/gcm_impl.h"
#include "crypto/secret.h"

namespace gcfs {
namespace {

// The manager only serves to pick, once, the functions for this processor: the direct GCM calls
// take the expanded key and a per-call context and keep no state in it, so every thread may call
// them. They are code of the library, not memory of the manager, which is freed once they are read.
struct Functions {
  aes_gcm_pre_t pre = nullptr;
  aes_gcm_enc_dec_t enc = nullptr;
  aes_gcm_enc_dec_t dec = nullptr;
  std::uint32_t arch = IMB_ARCH_NONE;
  std::uint64_t features = 0;
};

const Functions& functions() {
  static const Functions f = [] {
    IMB_MGR* mgr = alloc_mb_mgr(0);
    if (!mgr) throw std::runtime_error("cpu engine: intel-ipsec-mb: cannot allocate its manager");
    IMB_ARCH arch = IMB_ARCH_NONE;
    init_mb_mgr_auto(mgr, &arch);
    if (const int err = imb_get_errno(mgr); err != 0 || arch == IMB_ARCH_NONE) {
      free_mb_mgr(mgr);
      throw std::runtime_error(std::string("cpu engine: intel-ipsec-mb: ") + imb_get_strerror(err));
    }
    Functions r;
    r.pre = mgr->gcm256_pre;
    r.enc = mgr->gcm256_enc;
    r.dec = mgr->gcm256_dec;
    r.arch = mgr->used_arch;
    r.features = mgr->features;
    free_mb_mgr(mgr);
    return r;
  }();
  return f;
}

// The expanded key (round keys and GHASH powers) of the last key this thread used, kept while
// consecutive chunks use the same key, as gcm_openssl.cc keeps its keyed contexts (a request's
// chunks all belong to one file): the round keys and the powers of the hash key are computed once
// a file rather than once a chunk. Compared in constant time, wiped when replaced and with the thread.
struct ExpandedKey {
  alignas(64) gcm_key_data data;
  std::array<std::uint8_t, kChunkKeyBytes> key{};
  bool keyed = false;
  ExpandedKey() = default;
  ExpandedKey(const ExpandedKey&) = delete;
  ExpandedKey& operator=(const ExpandedKey&) = delete;
  ~ExpandedKey() { wipe(); }
  void wipe() {
    OPENSSL_cleanse(&data, sizeof data);
    OPENSSL_cleanse(key.data(), key.size());
    keyed = false;
  }
};

void check_errno(const char* what) {
  if (const int err = imb_get_errno(nullptr); err != 0)
    throw std::runtime_error(std::string("cpu engine: intel-ipsec-mb AES-256-GCM ") + what + ": " + imb_get_strerror(err));
}

// Each thread's ExpandedKey lives in secret memory (crypto/secret.h: locked against swapping,
// wiped when freed), as every other copy of key material does, and goes with the thread.
class ExpandedKeySlot {
 public:
  ExpandedKeySlot() = default;
  ExpandedKeySlot(const ExpandedKeySlot&) = delete;
  ExpandedKeySlot& operator=(const ExpandedKeySlot&) = delete;
  ~ExpandedKeySlot() {
    if (!key_) return;
    key_->~ExpandedKey();
    free_secret(block_, kBytes);
  }
  ExpandedKey& get() {
    if (!key_) {
      block_ = allocate_secret(kBytes);
      void* p = block_;
      std::size_t space = kBytes;
      key_ = new (std::align(alignof(ExpandedKey), sizeof(ExpandedKey), p, space)) ExpandedKey();
    }
    return *key_;
  }

 private:
  static constexpr std::size_t kBytes = sizeof(ExpandedKey) + alignof(ExpandedKey);
  void* block_ = nullptr;
  ExpandedKey* key_ = nullptr;
};

const gcm_key_data& expanded(const ChunkOp& op, const Functions& f) {
  if (!op.key) throw std::invalid_argument("cpu engine: chunk op without a key");
  if (op.len > INT_MAX || op.aad_len > kMaxChunkAadBytes) throw std::invalid_argument("cpu engine: chunk op too large");
  thread_local ExpandedKeySlot slot;
  ExpandedKey& k = slot.get();
  if (!k.keyed || CRYPTO_memcmp(k.key.data(), op.key->data(), kChunkKeyBytes) != 0) {
    k.wipe();
    f.pre(op.key->data(), &k.data);
    check_errno("key expansion");
    std::copy_n(op.key->data(), kChunkKeyBytes, k.key.begin());
    k.keyed = true;
  }
  return k.data;
}

}  // namespace

bool gcm_ipsec_mb_compiled() { return true; }

bool gcm_ipsec_mb_fast_here() {
  const Functions& f = functions();
  const std::uint64_t fast = IMB_FEATURE_VAES | IMB_FEATURE_VPCLMULQDQ | IMB_FEATURE_AVX512_SKX;
  return f.arch == IMB_ARCH_AVX512 && (f.features & fast) == fast;
}

std::string gcm_ipsec_mb_isa() {
  const Functions& f = functions();
  const bool vaes = (f.features & (IMB_FEATURE_VAES | IMB_FEATURE_VPCLMULQDQ)) == (IMB_FEATURE_VAES | IMB_FEATURE_VPCLMULQDQ);
  switch (f.arch) {
    case IMB_ARCH_AVX512: return vaes ? "AVX-512 VAES" : "AVX-512";
    case IMB_ARCH_AVX2: return "AVX2";
    case IMB_ARCH_AVX: return "AVX";
    case IMB_ARCH_SSE: return "SSE AES-NI";
    case IMB_ARCH_NOAESNI: return "no AES-NI";
    default: return "unknown";
  }
}

void gcm_ipsec_mb_seal(ChunkOp& op) {
  const Functions& f = functions();
  const gcm_key_data& key = expanded(op, f);
  gcm_context_data ctx;  // the running state of this one call (counter, GHASH), no key
  f.enc(&key, &ctx, op.out, op.in, op.len, op.nonce.data(), op.aad, op.aad_len, op.tag.data(), kChunkTagBytes);
  check_errno("seal");
  op.ok = true;
}

void gcm_ipsec_mb_open(ChunkOp& op) {
  const Functions& f = functions();
  const gcm_key_data& key = expanded(op, f);
  gcm_context_data ctx;
  // Decryption computes the tag of what it read; the comparison with the stored one is ours.
  std::array<std::uint8_t, kChunkTagBytes> computed{};
  f.dec(&key, &ctx, op.out, op.in, op.len, op.nonce.data(), op.aad, op.aad_len, computed.data(), kChunkTagBytes);
  check_errno("open");
  op.ok = CRYPTO_memcmp(computed.data(), op.tag.data(), kChunkTagBytes) == 0;
  if (!op.ok && op.len) std::memset(op.out, 0, op.len);
}

}  // namespace gcfs
