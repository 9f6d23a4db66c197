// The cpu engine: AES-256-GCM through intel-ipsec-mb or OpenSSL, whichever is faster here (see
// crypto/gcm_impl.h), with the chunks of a batch spread over a pool of threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "crypto/chunk_engine.h"
#include "crypto/thread_pool.h"

namespace gcfs {

class CpuEngine final : public ChunkEngine {
 public:
  // threads = 0: one per online core. Batches smaller than parallel_min_bytes stay on the calling
  // thread: below it, waking workers costs more than it saves; larger ones get a thread for every
  // half of parallel_min_bytes they hold, at most their share of the cores.
  explicit CpuEngine(std::size_t threads = 0, std::size_t parallel_min_bytes = 256 * 1024);
  std::string name() const override { return "cpu"; }
  void seal(std::span<ChunkOp> ops) override;
  void open(std::span<ChunkOp> ops) override;
  // Helpers seal parts while the calling thread writes out the ones done: the cipher and the
  // caller's writes overlap instead of following each other. A batch that gets no helper (one
  // below parallel_min_bytes, or with every core's share taken by other batches) is sealed whole
  // and handed over in one call, as the base version does.
  void seal_in_parts(std::span<ChunkOp> ops, std::span<const std::size_t> ends, const PartWriter& write) override;
  std::size_t threads() const { return pool_ ? pool_->workers() + 1 : 1; }

 private:
  void run(std::span<ChunkOp> ops, bool seal);
  // Threads for a batch of `bytes` while `active` batches (this one included) are at work: the
  // caller's thread included, at least 1.
  std::size_t threads_for(std::size_t bytes, std::size_t active) const;
  std::unique_ptr<ThreadPool> pool_;
  // Batches being sealed or opened right now (one per FUSE request at work).
  std::atomic<std::size_t> active_{0};
  std::size_t parallel_min_bytes_;
};

// Seals or opens one op on the calling thread. Shared with the gpu engine's fallback path.
void cpu_seal_one(ChunkOp& op);
void cpu_open_one(ChunkOp& op);

}  // namespace gcfs
