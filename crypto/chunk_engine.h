// The engine interface: everything the filesystem asks of a cipher backend. A backend seals and
// opens batches of independent chunks with AES-256-GCM; the cpu engine (OpenSSL) and the gpu
// engine (our CUDA kernels) implement it and must produce bit-identical output.
//
// Why batches: one FUSE read or write of up to 1 MiB touches many chunks, and concurrent requests
// can be gathered further; a batch is what lets the cpu engine spread work over cores and the gpu
// engine fill an H100 whose 132 SMs a single 64 KiB chunk cannot occupy.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "crypto/secret.h"

namespace gcfs {

constexpr std::size_t kChunkKeyBytes = 32;
constexpr std::size_t kChunkNonceBytes = 12;
constexpr std::size_t kChunkTagBytes = 16;
constexpr std::size_t kMaxChunkAadBytes = 64;

using ChunkKey = SecretKey<kChunkKeyBytes>;

// One chunk to seal or open. GCM as NIST SP 800-38D specifies it with a 96-bit IV: the counter
// block of 16-byte block i of the chunk is nonce || be32(i + 2), block 1 masks the tag.
struct ChunkOp {
  const ChunkKey* key = nullptr;                // must stay alive for the call
  std::array<std::uint8_t, kChunkNonceBytes> nonce{};
  const std::uint8_t* aad = nullptr;            // at most kMaxChunkAadBytes
  std::size_t aad_len = 0;
  const std::uint8_t* in = nullptr;             // seal: plaintext; open: ciphertext
  std::uint8_t* out = nullptr;                  // len bytes; may equal in
  std::size_t len = 0;                          // any length, 0 included
  std::array<std::uint8_t, kChunkTagBytes> tag{};  // seal: written; open: the tag to check
  bool ok = false;                              // open: true only if the tag matched
};

// Host memory for chunk data, handed out by an engine (ChunkEngine::allocate_io_buffer). Move-only;
// frees itself through the release function the engine gave it, which must not depend on the
// engine still being alive (a thread's buffers can outlive the engine that made them).
class HostBuffer {
 public:
  using Release = std::function<void(std::uint8_t*, std::size_t)>;
  HostBuffer() = default;
  HostBuffer(std::uint8_t* data, std::size_t size, Release release, bool pinned)
      : data_(data), size_(size), release_(std::move(release)), pinned_(pinned) {}
  HostBuffer(HostBuffer&& o) noexcept { swap(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    HostBuffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() {
    if (data_ && release_) release_(data_, size_);
  }
  std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  // True when the memory is page-locked by the engine (its copy engines reach it directly).
  bool pinned() const { return pinned_; }

  // Plain memory, zero-filled: what the base engine hands out (crypto/host_buffer.cc).
  // Page-aligned, so that the backing file can read and write it with O_DIRECT (format 2).
  static HostBuffer plain(std::size_t size);
  static constexpr std::size_t kPageBytes = 4096;

 private:
  void swap(HostBuffer& o) noexcept {
    std::swap(data_, o.data_), std::swap(size_, o.size_), std::swap(release_, o.release_), std::swap(pinned_, o.pinned_);
  }
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  Release release_;
  bool pinned_ = false;
};

// Thrown by an engine that could not do a batch because its hardware failed (a GPU fell off the
// bus, say), with the input of every op left untouched: the batch may be redone elsewhere. The
// outputs may hold anything. Any other exception means the batch itself was at fault.
class EngineFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ChunkEngine {
 public:
  virtual ~ChunkEngine() = default;
  // "cpu", "gpu", "auto": what `info`, logs and benchmarks print.
  virtual std::string name() const = 0;
  // Both calls are safe from many threads at once; the gpu engine relies on concurrent callers
  // to form large batches. They return when every op of the batch is done.
  //
  // seal: encrypts in -> out and writes tag for every op.
  virtual void seal(std::span<ChunkOp> ops) = 0;
  // open: decrypts in -> out and sets ok. For an op whose tag does not match, ok is false and out
  // holds zeros, never unauthenticated plaintext.
  virtual void open(std::span<ChunkOp> ops) = 0;

  // Hands over sealed parts of a batch: write(a, b) receives parts [a, b).
  using PartWriter = std::function<bool(std::size_t first_part, std::size_t end_part)>;
  // seal, with the batch handed back in parts as they are done, so that the caller can write out
  // the first parts while later ones are still being sealed. Part p is ops [ends[p-1], ends[p])
  // (ends ascending, ends.back() == ops.size()). write gets every part once, in order, in runs
  // of consecutive parts whose ops are all sealed, on the calling thread; when it returns false
  // no later part is handed over (they may still be sealed), and so when it throws. Returns, or
  // throws what sealing or write threw (no part that failed is handed over), once no thread
  // touches the ops any more.
  // This version seals the whole batch first and hands it over in one call: the same system calls
  // as seal and then one write of everything, for engines that gain nothing from parts.
  virtual void seal_in_parts(std::span<ChunkOp> ops, std::span<const std::size_t> ends, const PartWriter& write) {
    seal(ops);
    if (!ends.empty()) (void)write(0, ends.size());
  }

  // Memory for the caller's chunk data (the ops' in and out), zero-filled. Ops pointing into it
  // may be processed faster: the gpu engine hands out page-locked memory and copies such ops
  // straight to and from the GPU instead of through its staging buffers. Any memory stays valid
  // for ops; this is only the fast kind. Safe from many threads; the buffer may outlive the engine.
  virtual HostBuffer allocate_io_buffer(std::size_t bytes) { return HostBuffer::plain(bytes); }

  // True once the engine has lost its hardware for good and does every batch on its fallback
  // (still correct, but no longer what it was chosen for): a hybrid engine then stops giving it
  // work. Cheap; called after every part a hybrid engine hands it.
  virtual bool degraded() const { return false; }
};

}  // namespace gcfs
