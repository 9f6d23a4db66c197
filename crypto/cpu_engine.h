// The cpu engine: AES-256-GCM through OpenSSL (AES-NI, VAES and PCLMULQDQ where the processor has
// them), with the chunks of a batch spread over a pool of threads.
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
  std::size_t threads() const { return pool_ ? pool_->workers() + 1 : 1; }

 private:
  void run(std::span<ChunkOp> ops, bool seal);
  std::unique_ptr<ThreadPool> pool_;
  // Batches being sealed or opened right now (one per FUSE request at work).
  std::atomic<std::size_t> active_{0};
  std::size_t parallel_min_bytes_;
};

// Seals or opens one op on the calling thread. Shared with the gpu engine's fallback path.
void cpu_seal_one(ChunkOp& op);
void cpu_open_one(ChunkOp& op);

}  // namespace gcfs
