// The gpu engine's scheduler: gathers the chunk ops of concurrent callers into launches on a pool
// of CUDA streams (one staging slot per stream, on every GPU in use), and redoes a batch on the
// fallback engine when the GPU fails it. One batch's own work (keys, staging, kernels, results) is
// gpu_batch_launch.cu's; the class is declared in gpu_engine_impl.h.
//
// No dispatcher thread: a caller queues its request (cut into pieces) and then works as a leader
// while its request is unfinished: when a slot is free it takes queued pieces, its own and other
// callers', packs them into the slot's pinned buffer and launches; when none is free it finishes
// the oldest batch it launched. A lone request thus goes straight to the GPU with no thread
// hand-off, and under load the queue grows while slots are busy, so batches grow by themselves.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "crypto/diagnostics.h"
#include "crypto/errors.h"
#include "crypto/secret.h"
#include "cuda/cuda_handles.h"
#include "cuda/gpu_engine_impl.h"
#include "cuda/host_numa.h"
#include "cuda/host_tables.h"

namespace gcfs::gpu {
namespace {

// The wakes this thread decided under the engine's lock, carried out once it has let go of it.
std::vector<std::shared_ptr<Waiter>>& decided_wakes() {
  thread_local std::vector<std::shared_ptr<Waiter>> v;
  return v;
}
void wake_later(Request* r) { decided_wakes().push_back(r->waiter); }
void wake_decided() {
  auto& v = decided_wakes();
  for (auto& w : v) w->wake();
  v.clear();
}
// Lets go of the engine's lock, then wakes whom this thread decided to wake while it held it.
void unlock_and_wake(std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  wake_decided();
}

// Whether memcpy into write-combined pinned memory beats ordinary pinned memory on this machine
// (it should; some virtual machines map it uncached, which would be ruinous): measured, not assumed.
bool write_combined_upload_is_faster() {
  constexpr std::size_t kBytes = 4u << 20;
  std::vector<unsigned char> src(kBytes, 0x5a);
  auto best_seconds = [&](const PinnedBuffer& dst) {
    double best = 1e9;
    for (int i = 0; i < 3; ++i) {
      const auto t0 = Clock::now();
      std::memcpy(dst.get(), src.data(), kBytes);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return best;
  };
  const PinnedBuffer plain(kBytes), wc(kBytes, true);
  return best_seconds(wc) < best_seconds(plain);
}

void report_default(const std::string& m) { diag::error(m); }

}  // namespace

std::atomic<std::uint64_t> g_launches{0}, g_pieces{0}, g_requests{0};

GpuEngine::GpuEngine(const GpuOptions& o, ChunkEngine& fallback, std::vector<int> devices)
    : options_(o), fallback_(fallback) {
  if (!options_.on_error) options_.on_error = report_default;
  if (!parse_kernel(o.kernel)) throw UserError("unknown GPU kernel '" + o.kernel + "': choose auto, coarse or fine");
  const int streams = std::max(1, o.streams_per_gpu);
  max_data_ = std::max<std::size_t>(o.max_batch_bytes, kMaxGpuChunkBytes) + kMaxBatchChunks * 16;
  piece_limit_ = std::clamp<std::size_t>(o.piece_bytes, kMaxGpuChunkBytes, max_data_ - kMaxBatchChunks * 16);
  upload_wc_ = write_combined_upload_is_faster();
  ResidentPause pause;  // allocations below may wait for a device to go idle
  for (int d : devices) {
    auto st = std::make_unique<DeviceState>();
    st->device = d;
    st->order = devices_.size();
    check_cuda(cudaSetDevice(d), "cudaSetDevice");
    check_cuda(cudaDeviceGetAttribute(&st->sm_count, cudaDevAttrMultiProcessorCount, d), "device attributes");
    // Failure injection (tests) counts launched batches, which the resident worker has none of.
    const bool resident = o.resident && o.inject_failure_at_batch == 0 && !o.inject_failure_now;
    const int resident_ctas = resident ? std::clamp(o.resident_ctas > 0 ? o.resident_ctas : st->sm_count / 2, 1,
                                                      std::max(1, st->sm_count / 2))
                                         : 0;
    st->launch_sms = std::max(1, st->sm_count - resident_ctas);
    check_cuda(configure_kernels(), "configuring the kernels");
    st->te0 = DeviceBuffer(d, 256 * sizeof(std::uint32_t));
    check_cuda(cudaMemcpy(st->te0.get(), host_te0().data(), 256 * sizeof(std::uint32_t), cudaMemcpyHostToDevice),
               "uploading the AES tables");
    st->tables.te0 = st->te0.get<std::uint32_t>();
    st->numa_node = gpu_numa_node(d);
    {
      // The staging buffers on the GPU's own NUMA node: on a host with two sockets, copies between
      // the GPU and the other socket's memory cross the socket link.
      numa::ScopedPreferredNode near(st->numa_node);
      for (int s = 0; s < streams; ++s) slots_.push_back(std::make_unique<Slot>(*st, max_data_, upload_wc_));
      if (resident_ctas > 0) {
        ResidentOptions ro;
        ro.ctas = resident_ctas;
        ro.idle_stop = o.resident_idle;
        ro.max_parts = o.resident_max_parts;
        ro.min_part_segments = static_cast<std::uint32_t>(o.resident_min_part_bytes / (16 * kSegmentBlocksSmall));
        ro.on_error = options_.on_error;
        residents_.push_back(std::make_unique<ResidentQueue>(d, st->tables, ro, [this](const ChunkKey& k) {
          return host_keys_.get(k);
        }));
      }
    }
    devices_.push_back(std::move(st));
  }
  for (auto& s : slots_) free_.push_back(s.get());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t copiers = o.copy_threads > 0 ? static_cast<std::size_t>(o.copy_threads) : cores;
  if (copiers > 1) copy_pool_ = std::make_unique<ThreadPool>(copiers - 1);
}

GpuEngine::~GpuEngine() {
  teardown_pause_.emplace();  // every resident worker stopped until the members below are freed
  residents_.clear();
  for (auto& d : devices_) {
    cudaSetDevice(d->device);
    cudaDeviceSynchronize();
  }
}

// Page-locked (cudaHostAlloc, portable to every GPU) and registered, so ops in it skip staging.
// When pinning fails (locked-memory limits), plain memory: slower, never wrong.
HostBuffer GpuEngine::allocate_io_buffer(std::size_t bytes) {
  void* p = nullptr;
  cudaError_t e;
  {
    ResidentPause pause;  // pinning may wait for the devices to go idle
    e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return HostBuffer::plain(bytes);
  }
  auto* data = static_cast<std::uint8_t*>(p);
  std::memset(data, 0, bytes);
  pinned_->add(data, bytes);
  return HostBuffer(
      data, bytes,
      [reg = pinned_](std::uint8_t* q, std::size_t n) {
        reg->remove(q);  // first, so no later batch takes the freed range for pinned
        secure_wipe(q, n);  // it held plaintext; the driver reuses pinned memory as it is
        ResidentPause pause;  // cudaFreeHost waits for the devices to go idle
        cudaFreeHost(q);
      },
      true);
}

bool GpuEngine::parse_kernel(const std::string& k) {
  if (k == "auto") return auto_kernel_ = true;
  auto_kernel_ = false;
  return parse_variant(k, &variant_);
}

// See GpuOptions::cold_key_cpu_bytes.
bool GpuEngine::small_with_a_cold_key(std::span<const ChunkOp> ops) {
  if (options_.cold_key_cpu_bytes == 0) return false;
  std::size_t bytes = 0;
  for (const auto& op : ops) bytes += op.len;
  if (bytes >= options_.cold_key_cpu_bytes) return false;
  bool cold = false;
  const ChunkKey* last = nullptr;
  for (const auto& op : ops) {
    if (!op.key || op.key == last) continue;
    last = op.key;
    if (!host_keys_.has(*op.key) && !host_keys_.seen_enough(*op.key, options_.key_warmup_batches)) cold = true;
  }
  return cold;
}

// A request for the resident worker: small, every op in engine memory both ways, 4-byte aligned,
// its output either its input (a read decrypted in place: the worker writes the result over it
// only once the chunk is done) or apart from it; should the GPU fail midway, the fallback redoes
// the ops from their inputs.
bool GpuEngine::resident_can_take(std::span<const ChunkOp> ops) {
  std::size_t bytes = 0;
  for (const auto& op : ops) {
    bytes += op.len;
    const bool aligned = ((reinterpret_cast<std::uintptr_t>(op.in) | reinterpret_cast<std::uintptr_t>(op.out)) & 3) == 0;
    const bool disjoint = op.out == op.in || op.out + op.len <= op.in || op.in + op.len <= op.out;
    if (!gpu_can_take(op) || op.len == 0 || !aligned || !disjoint || bytes > options_.resident_max_request_bytes) return false;
  }
  auto reg = pinned_->shared_lock();
  for (const auto& op : ops)
    if (!pinned_->contains_locked(op.in, op.len) || !pinned_->contains_locked(op.out, op.len)) return false;
  return true;
}

void GpuEngine::run(std::span<ChunkOp> ops, bool seal) {
  if (ops.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (disabled_) return run_fallback(ops, seal);
  }
  if (small_with_a_cold_key(ops)) return run_fallback(ops, seal);
  if (!residents_.empty() && resident_can_take(ops)) {
    ResidentQueue& q = *residents_[next_resident_.fetch_add(1, std::memory_order_relaxed) % residents_.size()];
    switch (q.run(ops, seal)) {
      case ResidentQueue::Outcome::Done: return;
      case ResidentQueue::Outcome::Failed: return run_fallback(ops, seal);  // inputs intact (resident_can_take)
      case ResidentQueue::Outcome::NotTaken: break;
    }
  }
  Request req;
  std::vector<Piece> pieces;
  split(ops, seal, req, pieces);
  std::deque<Batch> mine;
  std::unique_lock lock(mu_);
  req.pending = pieces.size();
  ++active_requests_;
  if (req.pending) g_requests.fetch_add(1, std::memory_order_relaxed);
  for (auto& p : pieces) queue_.push_back(p);
  cv_.notify_all();  // leaders waiting for company (maybe_gather)
  while (req.pending > 0 || !mine.empty()) {
    if (!queue_.empty() && !free_.empty() && !disabled_) {
      maybe_gather(lock, mine.size(), req);
      if (queue_.empty() || free_.empty()) continue;
      Batch b = take_batch();
      unlock_and_wake(lock);
      const bool launched = launch(b);
      lock.lock();
      if (launched) mine.push_back(std::move(b));
      else finish_on_fallback(lock, b);
      continue;
    }
    if (!mine.empty()) {
      Batch b = std::move(mine.front());
      mine.pop_front();
      unlock_and_wake(lock);
      const bool ok = complete(b);
      lock.lock();
      if (ok) finish(b, true);
      else finish_on_fallback(lock, b);
      continue;
    }
    if (disabled_ && !queue_.empty()) {  // the GPU failed: whatever is queued goes to the fallback
      Batch b;
      b.pieces.assign(queue_.begin(), queue_.end());
      queue_.clear();
      finish_on_fallback(lock, b);
      continue;
    }
    req.waiter->arm();  // under the lock, after the checks above
    unlock_and_wake(lock);
    req.waiter->wait();
    lock.lock();
  }
  --active_requests_;
  hand_off();
  unlock_and_wake(lock);
}

// Called by a thread leaving run() with the lock held: if pieces still wait while a slot is free,
// the owner of the oldest one is woken to lead (every leader that might have taken them is gone
// or busy; a busy one finds them itself when it loops, so a wake-up it misses loses nothing).
void GpuEngine::hand_off() {
  if (!queue_.empty() && (!free_.empty() || disabled_)) wake_later(queue_.front().request);
}

// Ops the GPU cannot take (oversized) go to the fallback at once; the rest is cut into pieces.
void GpuEngine::split(std::span<ChunkOp> ops, bool seal, Request& req, std::vector<Piece>& pieces) {
  // A request is cut into about one part per stream (at least 64 KiB each), so that packing one
  // part overlaps the GPU's work on the previous one even for a lone caller.
  // With no CPU copies to overlap (every op in pinned memory), parts under 256 KiB would only add
  // launches and driver calls, so such a request is cut more coarsely.
  std::size_t total = 0;
  bool all_direct = true;
  {
    auto reg = pinned_->lock();
    for (const auto& op : ops) {
      total += padded_len(op.len);
      all_direct = all_direct && pinned_->contains_locked(op.in, op.len) && pinned_->contains_locked(op.out, op.len);
    }
  }
  const std::size_t min_piece = all_direct ? std::size_t{256} << 10 : std::size_t{64} << 10;
  const std::size_t limit = std::clamp<std::size_t>((total + slots_.size() - 1) / slots_.size(), min_piece,
                                                    std::max(min_piece, piece_limit_));
  std::size_t start = 0, bytes = 0, keys = 0;
  const ChunkKey* last_key = nullptr;
  auto flush = [&](std::size_t end) {
    if (end > start) pieces.push_back({&req, ops.subspan(start, end - start), bytes, keys, seal});
    start = end, bytes = 0, keys = 0, last_key = nullptr;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!gpu_can_take(ops[i])) {
      flush(i);
      run_fallback(ops.subspan(i, 1), seal);
      start = i + 1;
      continue;
    }
    const std::size_t b = padded_len(ops[i].len);
    const bool new_key = ops[i].key != last_key;
    if (i > start && (bytes + b > limit || i - start >= kMaxBatchChunks || keys + new_key > kSlotKeys)) flush(i);
    if (ops[i].key != last_key) ++keys, last_key = ops[i].key;
    bytes += b;
  }
  flush(ops.size());
}

// While the GPU is busy with batches this thread launched, wait briefly for other callers'
// requests so the next launch carries more; never while the caller's own parts are queued.
void GpuEngine::maybe_gather(std::unique_lock<std::mutex>& lock, std::size_t in_flight, const Request& own) {
  if (in_flight == 0 || options_.gather_wait.count() <= 0) return;
  std::size_t queued = 0;
  for (const auto& p : queue_) {
    if (p.request == &own) return;
    queued += p.bytes;
  }
  if (queued >= options_.max_batch_bytes / 2) return;
  if (!decided_wakes().empty()) {  // not held back while this thread waits for company
    unlock_and_wake(lock);
    lock.lock();
  }
  cv_.wait_for(lock, options_.gather_wait);
}

// Takes queued pieces of one kind for a free slot. While other slots of its GPU are free too, it
// takes only its share of the queue (the rest starts on the other streams at once); with one free
// slot it takes all that fits: the queue grew while the GPU was busy, and one launch carries it.
Batch GpuEngine::take_batch() {
  Batch b;
  b.slot = take_free_slot();
  b.seal = queue_.front().seal;
  std::size_t queued = 0;
  for (const auto& p : queue_)
    if (p.seal == b.seal) queued += p.bytes;
  // The share is counted over the free streams of the GPU this batch goes to, so that a second
  // GPU's idle streams do not halve the batches of a load the first one carries alone; a queue
  // of two pieces' worth or more (a large request, many callers) is shared over every free stream.
  std::size_t free_slots = 1;
  for (const Slot* f : free_) free_slots += queued >= 2 * piece_limit_ || f->dev == b.slot->dev;
  const std::size_t share = (queued + free_slots - 1) / free_slots;
  std::size_t bytes = 0, keys = 0, chunks = 0;
  for (auto it = queue_.begin(); it != queue_.end() && (b.pieces.empty() || bytes < share);) {
    const bool fits = bytes + it->bytes <= max_data_ - kMaxBatchChunks * 16 &&
                      chunks + it->ops.size() <= kMaxBatchChunks && keys + it->key_changes <= kSlotKeys;
    if (it->seal == b.seal && (b.pieces.empty() || fits)) {
      bytes += it->bytes, keys += it->key_changes, chunks += it->ops.size();
      b.pieces.push_back(*it);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  b.spin = active_requests_ == 1 || (bytes <= options_.spin_batch_bytes && active_requests_ <= 2 * slots_.size());
  for (const auto& p : b.pieces) b.gathered = b.gathered || p.request != b.pieces.front().request;
  return b;
}

// With several GPUs, a GPU's streams fill before the next GPU's start: the free slot taken is one
// of the GPU with the fewest free (ties: the first listed). A light load, such as a mounted
// vault's streams, then stays on one GPU, with its keys' tables warm there and no second device
// to wait on (spread round-robin over two GPUs, 8 streams through the mount ran slower and at
// 14 to 22% more daemon CPU per GB than on one); a load that keeps one GPU's streams busy spills
// onto the next. Lock held; free_ is not empty.
Slot* GpuEngine::take_free_slot() {
  auto pick = free_.begin();
  if (devices_.size() > 1) {
    std::size_t best = SIZE_MAX;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      std::size_t free_here = 0;
      for (const Slot* f : free_) free_here += f->dev == (*it)->dev;
      if (free_here < best || (free_here == best && (*it)->dev->order < (*pick)->dev->order)) best = free_here, pick = it;
    }
  }
  Slot* s = *pick;
  free_.erase(pick);
  return s;
}

// A GPU that fails is taken out of use: its free slots leave the pool, and its batches in flight,
// once they fail too, go back to the queue for the GPUs left. When none is left, everything from
// here on runs on the fallback. Reported once per GPU.
void GpuEngine::fail(Slot& s, const std::string& what) {
  bool first;
  std::string left;
  {
    std::lock_guard lock(mu_);
    s.broken = true;
    first = !s.dev->broken;
    s.dev->broken = true;
    free_.erase(std::remove_if(free_.begin(), free_.end(), [&](Slot* f) { return f->dev == s.dev; }), free_.end());
    for (const auto& d : devices_)
      if (!d->broken) left += (left.empty() ? "" : ", ") + std::to_string(d->device);
    if (left.empty()) {
      disabled_ = true;
      lost_.store(true, std::memory_order_relaxed);
    }
    // Whoever waits with pieces queued must now run them elsewhere.
    for (const auto& p : queue_) wake_later(p.request);
  }
  wake_decided();
  if (first)
    options_.on_error("GPU " + std::to_string(s.dev->device) + " failed (" + what + "); " +
                      (left.empty() ? "this batch and every later one it is given run on the " + fallback_.name() + " engine"
                                    : "its batches go to GPU " + left + " from now on"));
}

// Called with the lock held; releases it while the fallback works. A batch that failed on one GPU
// while others are left goes back to the front of the queue instead (the inputs are untouched:
// a direct output never overlaps its input), and one of the other GPUs takes it.
void GpuEngine::finish_on_fallback(std::unique_lock<std::mutex>& lock, Batch& b) {
  if (b.slot && !disabled_) {
    for (auto it = b.pieces.rbegin(); it != b.pieces.rend(); ++it) queue_.push_front(*it);
    finish_slot(b.slot, !b.slot->broken);
    wake_later(queue_.front().request);
    return;
  }
  unlock_and_wake(lock);
  for (auto& p : b.pieces) run_fallback(p.ops, p.seal);
  lock.lock();
  finish(b, !b.slot || !b.slot->broken);
}

void GpuEngine::finish(Batch& b, bool slot_reusable) {
  finish_slot(b.slot, slot_reusable);
  for (auto& p : b.pieces)
    if (--p.request->pending == 0) wake_later(p.request);
}

}  // namespace gcfs::gpu
