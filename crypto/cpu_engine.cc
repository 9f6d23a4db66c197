#include "crypto/cpu_engine.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "crypto/gcm_impl.h"

namespace gcfs {

void cpu_seal_one(ChunkOp& op) { gcm_seal(chosen_gcm(), op); }

void cpu_open_one(ChunkOp& op) {
  // Nothing was ever sealed with more AAD than kMaxChunkAadBytes (sealing refuses it), so such an
  // op cannot be authentic: it fails like a tampered chunk, and the rest of its batch opens.
  if (op.key && op.len <= INT_MAX && op.aad_len > kMaxChunkAadBytes) {
    op.ok = false;
    if (op.len) std::memset(op.out, 0, op.len);
    return;
  }
  gcm_open(chosen_gcm(), op);
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
  pool_->parallel_for(ops.size(), [&](std::size_t i) { one(ops[i]); }, threads_for(bytes, active) - 1);
}

std::size_t CpuEngine::threads_for(std::size_t bytes, std::size_t active) const {
  const std::size_t share = threads() / active;  // threads for this batch, the caller's included
  // And each thread gets enough to be worth its wake-up: a 128 KiB read of 4 KiB chunks is about
  // 30 us of work on one core, and handing its chunks to 31 sleeping workers cost the daemon 3x
  // the CPU of doing them inline (random 128 KiB reads, 8 threads, 32 cores).
  const std::size_t worth = std::max<std::size_t>(1, bytes / std::max<std::size_t>(1, parallel_min_bytes_ / 2));
  return std::max<std::size_t>(1, std::min(share, worth));
}

void CpuEngine::seal_in_parts(std::span<ChunkOp> ops, std::span<const std::size_t> ends, const PartWriter& write) {
  std::size_t bytes = 0;
  for (const auto& op : ops) bytes += op.len;
  const std::size_t parts = ends.size();
  if (!pool_ || parts < 2 || bytes < parallel_min_bytes_) return ChunkEngine::seal_in_parts(ops, ends, write);
  // The batch counts as active while some of it is left to seal: the writes after that take no
  // core from the batches of other requests.
  const std::size_t active = active_.fetch_add(1, std::memory_order_relaxed) + 1;
  struct Leave {
    std::atomic<std::size_t>& n;
    bool left = false;
    void now() {
      if (!left) n.fetch_sub(1, std::memory_order_relaxed);
      left = true;
    }
    ~Leave() { now(); }
  } leave{active_};
  const std::size_t helpers = std::min(threads_for(bytes, active) - 1, parts - 1);
  if (helpers == 0) {
    for (auto& op : ops) cpu_seal_one(op);
    leave.now();
    (void)write(0, parts);
    return;
  }

  // Parts are claimed from a shared counter by the helpers and the caller alike; each part's
  // state says when it is sealed. The state lives in a shared_ptr: a helper that wakes after
  // everything is done only looks at the counter, never at the ops.
  enum : int { kPending = 0, kSealed = 1, kFailed = 2 };
  struct State {
    explicit State(std::size_t n) : state(new std::atomic<int>[n]) {
      for (std::size_t i = 0; i < n; ++i) state[i].store(kPending, std::memory_order_relaxed);
    }
    std::atomic<std::size_t> next{0};    // first part nobody has claimed
    std::atomic<std::size_t> joined{0};  // helpers that have started
    std::unique_ptr<std::atomic<int>[]> state;
    std::mutex mu;
    std::exception_ptr error;
  };
  auto st = std::make_shared<State>(parts);
  // Seals claimed part p and publishes it; only a claimed part's ops are touched.
  auto seal_part = [ops, ends](State& s, std::size_t p) {
    int result = kSealed;
    try {
      for (std::size_t i = p == 0 ? 0 : ends[p - 1]; i < ends[p]; ++i) cpu_seal_one(ops[i]);
    } catch (...) {
      std::lock_guard lk(s.mu);
      if (!s.error) s.error = std::current_exception();
      result = kFailed;
    }
    s.state[p].store(result, std::memory_order_release);
    s.state[p].notify_all();
  };
  pool_->offer(helpers, [st, parts, seal_part] {
    st->joined.fetch_add(1, std::memory_order_relaxed);
    for (std::size_t p; (p = st->next.fetch_add(1)) < parts;) seal_part(*st, p);
  });

  std::size_t handed = 0;
  bool stop = false;
  while (handed < parts && !stop) {
    std::size_t end = handed;
    while (end < parts && st->state[end].load(std::memory_order_acquire) == kSealed) ++end;
    if (end < parts && st->state[end].load(std::memory_order_acquire) == kFailed) break;
    // What is sealed goes out at once while a helper seals the rest: that is the overlap. Until a
    // helper has started, the caller seals on and hands everything over in one call at the end
    // (a helper still asleep must not turn one write per group into one per part).
    if (end > handed && (end == parts || st->joined.load(std::memory_order_relaxed) > 0)) {
      if (st->next.load(std::memory_order_relaxed) >= parts) leave.now();
      try {
        stop = !write(handed, end);
      } catch (...) {  // rethrown below, once no helper seals into the ops any more
        std::lock_guard lk(st->mu);
        if (!st->error) st->error = std::current_exception();
        stop = true;
      }
      handed = end;
      continue;
    }
    if (const std::size_t p = st->next.fetch_add(1); p < parts) {
      seal_part(*st, p);
      continue;
    }
    leave.now();
    st->state[handed].wait(kPending, std::memory_order_acquire);  // every part is claimed: wait for the next
  }
  // No more claims; wait for the parts that helpers still hold (they seal into the caller's ops).
  const std::size_t claimed = std::min(st->next.fetch_add(parts), parts);
  for (std::size_t p = 0; p < claimed; ++p) st->state[p].wait(kPending, std::memory_order_acquire);
  if (st->error) std::rethrow_exception(st->error);
}

void CpuEngine::seal(std::span<ChunkOp> ops) { run(ops, true); }
void CpuEngine::open(std::span<ChunkOp> ops) { run(ops, false); }

}  // namespace gcfs
