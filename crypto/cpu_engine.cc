#include "crypto/cpu_engine.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "crypto/evp_handles.h"

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

EVP_CIPHER_CTX* begin(const ChunkOp& op, int encrypt) {
  if (!op.key) throw std::invalid_argument("cpu engine: chunk op without a key");
  if (op.len > INT_MAX || op.aad_len > kMaxChunkAadBytes) throw std::invalid_argument("cpu engine: chunk op too large");
  thread_local KeyedCtx contexts[2];
  KeyedCtx& k = contexts[encrypt ? 1 : 0];
  EVP_CIPHER_CTX* ctx = k.ctx.get();
  if (k.keyed && CRYPTO_memcmp(k.key.data(), op.key->data(), kChunkKeyBytes) == 0) {
    check(EVP_CipherInit_ex2(ctx, nullptr, nullptr, op.nonce.data(), encrypt, nullptr), "init");
  } else {
    k.keyed = false;  // until the init with the new key has succeeded
    check(EVP_CipherInit_ex2(ctx, aes256gcm(), op.key->data(), op.nonce.data(), encrypt, nullptr), "init");
    std::copy_n(op.key->data(), kChunkKeyBytes, k.key.begin());
    k.keyed = true;
  }
  int outl = 0;
  if (op.aad_len) check(EVP_CipherUpdate(ctx, nullptr, &outl, op.aad, static_cast<int>(op.aad_len)), "AAD");
  return ctx;
}

}  // namespace

void cpu_seal_one(ChunkOp& op) {
  EVP_CIPHER_CTX* ctx = begin(op, 1);
  int outl = 0;
  if (op.len) check(EVP_EncryptUpdate(ctx, op.out, &outl, op.in, static_cast<int>(op.len)), "encrypt");
  int fin = 0;
  check(EVP_EncryptFinal_ex(ctx, op.out + outl, &fin), "finish");
  check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, kChunkTagBytes, op.tag.data()), "get tag");
  op.ok = true;
}

void cpu_open_one(ChunkOp& op) {
  // Nothing was ever sealed with more AAD than kMaxChunkAadBytes (sealing refuses it), so such an
  // op cannot be authentic: it fails like a tampered chunk, and the rest of its batch opens.
  if (op.key && op.len <= INT_MAX && op.aad_len > kMaxChunkAadBytes) {
    op.ok = false;
    if (op.len) std::memset(op.out, 0, op.len);
    return;
  }
  EVP_CIPHER_CTX* ctx = begin(op, 0);
  int outl = 0;
  if (op.len) check(EVP_DecryptUpdate(ctx, op.out, &outl, op.in, static_cast<int>(op.len)), "decrypt");
  check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, kChunkTagBytes, op.tag.data()), "set tag");
  int fin = 0;
  op.ok = EVP_DecryptFinal_ex(ctx, op.out + outl, &fin) == 1;
  if (!op.ok && op.len) std::memset(op.out, 0, op.len);
}

CpuEngine::CpuEngine(std::size_t threads, std::size_t parallel_min_bytes)
    : parallel_min_bytes_(parallel_min_bytes) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads - 1);
}

void CpuEngine::run(std::span<ChunkOp> ops, bool seal) {
  std::size_t bytes = 0;
  for (const auto& op : ops) bytes += op.len;
  auto one = seal ? cpu_seal_one : cpu_open_one;
  if (!pool_ || ops.size() < 2 || bytes < parallel_min_bytes_) {
    for (auto& op : ops) one(op);
    return;
  }
  // Each batch at work gets its share of the cores: with as many requests in flight as there are
  // cores (8 writers, say), each request's thread seals its own chunks, instead of every request
  // handing its chunks to the same pool and all of them queueing for it (more runnable threads
  // than cores, and a hand-off per chunk that buys nothing). One request alone still gets them all.
  const std::size_t active = active_.fetch_add(1, std::memory_order_relaxed) + 1;
  struct Leave {
    std::atomic<std::size_t>& n;
    ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
  } leave{active_};
  const std::size_t share = threads() / active;  // threads for this batch, the caller's included
  // And each thread gets enough to be worth its wake-up: a 128 KiB read of 4 KiB chunks is about
  // 30 us of work on one core, and handing its chunks to 31 sleeping workers cost the daemon 3x
  // the CPU of doing them inline (random 128 KiB reads, 8 threads, 32 cores).
  const std::size_t worth = std::max<std::size_t>(1, bytes / std::max<std::size_t>(1, parallel_min_bytes_ / 2));
  const std::size_t helpers = std::min(share, worth);
  pool_->parallel_for(ops.size(), [&](std::size_t i) { one(ops[i]); }, helpers > 0 ? helpers - 1 : 0);
}

void CpuEngine::seal(std::span<ChunkOp> ops) { run(ops, true); }
void CpuEngine::open(std::span<ChunkOp> ops) { run(ops, false); }

}  // namespace gcfs
