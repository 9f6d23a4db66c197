// The gpu engine: gathers the chunk ops of concurrent callers into launches on a pool of CUDA
// streams (one staging slot per stream, on every GPU in use), and redoes a batch on the fallback
// engine when the GPU fails it.
//
// No dispatcher thread: a caller queues its request (cut into pieces) and then works as a leader
// while its request is unfinished: when a slot is free it takes queued pieces, its own and other
// callers', packs them into the slot's pinned buffer and launches; when none is free it finishes
// the oldest batch it launched. A lone request thus goes straight to the GPU with no thread
// hand-off, and under load the queue grows while slots are busy, so batches grow by themselves.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "crypto/diagnostics.h"
#include "crypto/errors.h"
#include "crypto/secret.h"
#include "crypto/thread_pool.h"
#include "cuda/batch_layout.h"
#include "cuda/cuda_handles.h"
#include "cuda/driver_probe.h"
#include "cuda/gcm_kernels.h"
#include "cuda/gpu_engine.h"
#include "cuda/host_numa.h"
#include "cuda/host_tables.h"
#include "cuda/resident_queue.h"
#include "cuda/thread_waiter.h"

namespace gcfs {
namespace gpu {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kSlotKeys = 64;            // distinct keys one batch may use
constexpr std::size_t kMaxBatchChunks = 16384;   // ops one batch may hold

std::size_t align256(std::size_t n) { return (n + 255) & ~std::size_t{255}; }

struct KeyHash {
  std::size_t operator()(const ChunkKey& k) const noexcept {
    std::size_t h;
    std::memcpy(&h, k.data(), sizeof h);  // keys are uniformly random
    return h;
  }
};

// Key material per key, built once: round keys and GHASH tables in locked, wiped memory.
class HostKeyCache {
 public:
  bool has(const ChunkKey& key) {
    std::lock_guard lock(mu_);
    return map_.count(key) != 0;
  }
  // Counts a batch with a key not prepared yet; true once the key has come back `needed` times.
  bool seen_enough(const ChunkKey& key, unsigned needed) {
    std::lock_guard lock(mu_);
    if (seen_.size() >= 4 * kCapacity) seen_.clear();  // bounded; a key starts counting again
    return ++seen_[key] >= needed;
  }

  std::shared_ptr<const SecretBytes> get(const ChunkKey& key) {
    {
      std::lock_guard lock(mu_);
      if (auto it = map_.find(key); it != map_.end()) return it->second;
    }
    auto blob = std::make_shared<SecretBytes>(sizeof(KeyBlob));
    build_key_blob(key.data(), *reinterpret_cast<KeyBlob*>(blob->data()));
    std::lock_guard lock(mu_);
    if (map_.size() >= kCapacity) map_.clear();  // rare: more live files than this; rebuilt on demand
    map_.emplace(key, blob);
    return blob;
  }

 private:
  static constexpr std::size_t kCapacity = 1024;
  std::mutex mu_;
  std::unordered_map<ChunkKey, std::shared_ptr<const SecretBytes>, KeyHash> map_;
  std::unordered_map<ChunkKey, unsigned, KeyHash> seen_;  // batches of keys not prepared yet
};

// The page-locked buffers this engine handed out (allocate_io_buffer): an op whose data lies wholly
// inside one of them is copied by the GPU's copy engines straight from and to the caller's memory,
// with no CPU copy through the staging buffers. Shared with the buffers' release functions, since a
// thread's buffers may outlive the engine.
class PinnedRegistry {
 public:
  void add(const std::uint8_t* p, std::size_t n) {
    std::lock_guard lock(mu_);
    ranges_[reinterpret_cast<std::uintptr_t>(p)] = n;
  }
  void remove(const std::uint8_t* p) {
    std::lock_guard lock(mu_);
    ranges_.erase(reinterpret_cast<std::uintptr_t>(p));
  }
  // Whether [p, p + n) lies inside one registered buffer. Called for every op of a batch, under
  // one lock per batch (the caller holds `lock()`): a map lookup, tens of nanoseconds.
  bool contains_locked(const void* p, std::size_t n) const { return buffer_of_locked(p, n) != 0; }
  // The start of the registered buffer that holds [p, p + n), or 0 where none does.
  std::uintptr_t buffer_of_locked(const void* p, std::size_t n) const {
    if (ranges_.empty() || !p) return 0;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return 0;
    --it;
    return a - it->first <= it->second && n <= it->second - (a - it->first) ? it->first : 0;
  }
  std::unique_lock<std::shared_mutex> lock() { return std::unique_lock(mu_); }
  // For lookups alone (contains_locked, buffer_of_locked), by many callers at once.
  std::shared_lock<std::shared_mutex> shared_lock() { return std::shared_lock(mu_); }

 private:
  mutable std::shared_mutex mu_;
  std::map<std::uintptr_t, std::size_t> ranges_;  // start -> length
};

// One registry for the whole process: buffers are allocated portable (page-locked for every GPU),
// so when `--engine auto` runs one gpu engine per GPU, each of them takes the buffers the first one
// handed out as its own and skips staging for them too.
std::shared_ptr<PinnedRegistry> shared_pinned_registry() {
  static const auto registry = std::make_shared<PinnedRegistry>();
  return registry;
}

struct DeviceState {
  int device = 0;
  std::size_t order = 0;  // its place in the engine's list: the GPU that fills first comes first
  int sm_count = 0;
  int launch_sms = 0;   // SMs a cooperative launch may count on: those the resident worker leaves
  int numa_node = -1;   // of its PCI slot; its slots' pinned buffers are allocated there
  bool broken = false;  // failed: its slots are out of use (guarded by the engine's mutex)
  DeviceBuffer te0;
  DeviceTables tables;
};

// One stream with its staging: pinned host buffers, device buffers, and a small cache of the keys
// whose material already sits in device memory.
struct Slot {
  Slot(DeviceState& d, std::size_t max_data, bool write_combined_upload)
      : dev(&d),
        stream(d.device),
        done(d.device, cudaEventDisableTiming | cudaEventBlockingSync),
        header_cap(header_capacity(kMaxBatchChunks)),
        results_cap(align256(kMaxBatchChunks * (sizeof(Block128) + sizeof(std::uint32_t)))),
        data_cap(max_data),
        h_in(header_cap + data_cap, write_combined_upload),
        h_out(results_cap + data_cap),
        h_keys(kSlotKeys * sizeof(KeyBlob)),
        d_in(d.device, header_cap + data_cap),
        d_out(d.device, results_cap + data_cap),
        d_keys(d.device, kSlotKeys * sizeof(KeyBlob)),
        d_scratch(d.device, kDirectMaxChunks * sizeof(ChunkScratch)) {
    check_cuda(cudaMemset(d_scratch.get(), 0, d_scratch.size()), "clearing the GPU scratch");
  }
  // Freed only after ~GpuEngine synchronized the device; the buffers zero themselves (cuda_handles.h).

  DeviceState* dev;
  Stream stream;
  Event done;
  // One upload per batch: [descriptors | prefix sums | zeroed scratch | data]; one download:
  // [tags | ok | data]. Fewer copies, fewer driver calls: that is most of a small request's time.
  std::size_t header_cap, results_cap, data_cap;
  PinnedBuffer h_in, h_out, h_keys;
  DeviceBuffer d_in, d_out, d_keys;
  // Direct batches' scratch, which their kernel leaves zeroed, and its grid barrier's running count.
  DeviceBuffer d_scratch;
  std::uint32_t barrier_count = 0;
  std::array<ChunkKey, kSlotKeys> keys{};
  std::array<std::uint64_t, kSlotKeys> key_used{};  // batch number of last use; 0 = empty
  std::uint64_t batches = 0;
  bool broken = false;
};

// One caller's request. Its thread sleeps on its own waiter, woken only when the last of its
// pieces is done or when it is asked to lead (a slot is free and its pieces wait in the queue):
// one wake-up per event instead of every waiting caller for every finished batch.
struct Request {
  std::size_t pending = 0;
  std::shared_ptr<Waiter> waiter = this_thread_waiter();
};

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

struct Piece {
  Request* request;
  std::span<ChunkOp> ops;
  std::size_t bytes;        // padded data bytes
  std::size_t key_changes;  // upper bound on distinct keys
  bool seal;
};

struct Batch {
  Slot* slot = nullptr;
  bool seal = true;
  std::vector<Piece> pieces;
  std::vector<ChunkOp*> ops;
  std::vector<std::size_t> offsets;  // of each op's data; kept here, the upload buffer may be write-only
  // Per op: the GPU copies its input straight from op.in / its output straight to op.out (both in
  // memory this engine pinned), instead of through the staging buffers. The value is the start of
  // the pinned buffer that holds it (0: not direct), so that one 2D copy never spans two buffers.
  std::vector<std::uintptr_t> direct_in, direct_out;
  bool any_staged_out = true;
  // Every op direct both ways and 4-byte aligned: the kernel can move the data itself.
  bool all_direct = false;
  // Poll for the result before sleeping: while one request alone uses the engine, or the batch is
  // small and the callers few (GpuOptions::spin_batch_bytes). With many callers, batches are
  // gathered and a poll would only take a core from them, so leaders sleep until the GPU signals.
  bool spin = false;
  // Pieces of more than one caller's request.
  bool gathered = false;
  BatchPlan plan;
  std::size_t out_data_offset = 0;
};

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

std::atomic<std::uint64_t> g_launches{0}, g_pieces{0}, g_requests{0};  // gpu_launch_counters()

class GpuEngine final : public ChunkEngine {
 public:
  GpuEngine(const GpuOptions& o, ChunkEngine& fallback, std::vector<int> devices)
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

  ~GpuEngine() override {
    teardown_pause_.emplace();  // every resident worker stopped until the members below are freed
    residents_.clear();
    for (auto& d : devices_) {
      cudaSetDevice(d->device);
      cudaDeviceSynchronize();
    }
  }

  std::string name() const override { return "gpu"; }
  // Every GPU of this engine has failed: batches run on the fallback.
  bool degraded() const override { return lost_.load(std::memory_order_relaxed); }
  void seal(std::span<ChunkOp> ops) override { run(ops, true); }
  void open(std::span<ChunkOp> ops) override { run(ops, false); }

  // Page-locked (cudaHostAlloc, portable to every GPU) and registered, so ops in it skip staging.
  // When pinning fails (locked-memory limits), plain memory: slower, never wrong.
  HostBuffer allocate_io_buffer(std::size_t bytes) override {
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

 private:
  bool parse_kernel(const std::string& k) {
    if (k == "auto") return auto_kernel_ = true;
    auto_kernel_ = false;
    return parse_variant(k, &variant_);
  }

  // See GpuOptions::cold_key_cpu_bytes.
  bool small_with_a_cold_key(std::span<const ChunkOp> ops) {
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
  bool resident_can_take(std::span<const ChunkOp> ops) {
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

  static bool gpu_can_take(const ChunkOp& op) {
    return op.key && op.len <= kMaxGpuChunkBytes && op.aad_len <= kMaxAadBytes;
  }

  void run(std::span<ChunkOp> ops, bool seal) {
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
  void hand_off() {
    if (!queue_.empty() && (!free_.empty() || disabled_)) wake_later(queue_.front().request);
  }

  // Ops the GPU cannot take (oversized) go to the fallback at once; the rest is cut into pieces.
  void split(std::span<ChunkOp> ops, bool seal, Request& req, std::vector<Piece>& pieces) {
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
  void maybe_gather(std::unique_lock<std::mutex>& lock, std::size_t in_flight, const Request& own) {
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
  Batch take_batch() {
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
  Slot* take_free_slot() {
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

  std::uint32_t key_slot(Slot& s, const ChunkKey& key, std::vector<std::uint32_t>& uploads) {
    for (std::uint32_t i = 0; i < kSlotKeys; ++i)
      if (s.key_used[i] && s.keys[i] == key) {
        s.key_used[i] = s.batches;
        return i;
      }
    std::uint32_t victim = 0;  // least recently used; never one this batch uses (limit: kSlotKeys)
    for (std::uint32_t i = 1; i < kSlotKeys; ++i)
      if (s.key_used[i] < s.key_used[victim]) victim = i;
    const auto blob = host_keys_.get(key);
    std::memcpy(s.h_keys.get() + victim * sizeof(KeyBlob), blob->data(), sizeof(KeyBlob));
    s.keys[victim] = key;
    s.key_used[victim] = s.batches;
    uploads.push_back(victim);
    return victim;
  }

  bool launch(Batch& b) {
    Slot& s = *b.slot;
    try {
      if (s.broken) throw CudaError("stream unusable after an earlier error", cudaErrorUnknown);
      const bool injected_device =
          options_.inject_failure_on_device < 0 || options_.inject_failure_on_device == s.dev->device;
      if (injected_device && ((options_.inject_failure_at_batch > 0 && ++launches_ == options_.inject_failure_at_batch) ||
                              (options_.inject_failure_now && options_.inject_failure_now->exchange(false))))
        throw CudaError("injected failure", cudaErrorUnknown);
      ++s.batches;
      g_launches.fetch_add(1, std::memory_order_relaxed);
      g_pieces.fetch_add(b.pieces.size(), std::memory_order_relaxed);
      b.ops.clear();
      std::uint64_t blocks = 0;
      for (auto& p : b.pieces)
        for (auto& op : p.ops) b.ops.push_back(&op), blocks += blocks_of(static_cast<std::uint32_t>(op.len));
      std::vector<std::uint32_t> key_index(b.ops.size()), uploads;
      const ChunkKey* last = nullptr;
      std::uint32_t last_index = 0;
      for (std::size_t i = 0; i < b.ops.size(); ++i) {
        if (b.ops[i]->key != last) last = b.ops[i]->key, last_index = key_slot(s, *last, uploads);
        key_index[i] = last_index;
      }
      CtrVariant v = variant_;
      if (auto_kernel_) v = blocks < static_cast<std::uint64_t>(s.dev->sm_count) * 256 ? CtrVariant::Fine : CtrVariant::Coarse;
      const std::uint32_t task_blocks = ctr_task_blocks(v, blocks, s.dev->sm_count);
      // Short GHASH segments for small batches: a lone request waits on the longest serial chain.
      const std::uint32_t segment_blocks = blocks * 16 < (2u << 20) ? kSegmentBlocksSmall : kSegmentBlocksLarge;
      // Small fine-grained batches: one cooperative launch instead of the CTR and GHASH kernels;
      // with every op in engine memory, the launch moves the data itself (no copy calls).
      // Not for a gathered batch of 256 KiB or more, though: a fused launch is cooperative and holds
      // every SM, so fused batches on different streams run one after another, while separate CTR
      // and GHASH kernels and the copy engines' transfers of several streams overlap. Under load,
      // that overlap is worth more than the launch the fused kernel saves (measured on the H100:
      // 32 callers of 128 KiB reached 13 GB/s with fused 1 MiB batches).
      const bool fused = options_.fused && v == CtrVariant::Fine && blocks * 16 < (2u << 20) &&
                         !(b.gathered && blocks * 16 >= (256u << 10));
      classify_direct(b);
      // Direct: every op in engine memory, so the kernel moves the data itself (no copy calls, no
      // host copy). Up to kDirectMaxChunks descriptors the header rides in the launch's parameters
      // (mapped); a larger direct batch, gathered from many callers, copies its header (descriptors
      // and prefix sums, a few KiB) to the GPU first.
      const bool direct = fused && options_.direct && b.all_direct;
      const bool mapped = direct && b.ops.size() <= kDirectMaxChunks;
      // A direct batch's header travels in the launch's parameters, so it is packed in ordinary memory.
      thread_local std::vector<unsigned char> direct_header;
      if (mapped) direct_header.resize(header_capacity(b.ops.size()));
      b.plan = pack_batch(b.ops, key_index, task_blocks, segment_blocks, !b.seal,
                          mapped ? direct_header.data() : s.h_in.get(), /*copy_data=*/false, /*host_pointers=*/direct);
      b.offsets.resize(b.ops.size());
      for (std::size_t i = 0, off = 0; i < b.ops.size(); off += padded_len(b.ops[i]->len), ++i) b.offsets[i] = off;
      bool any_staged_in = false;
      for (std::size_t i = 0; i < b.ops.size(); ++i) any_staged_in |= !b.direct_in[i] && b.ops[i]->len;
      unsigned char* in_data = s.h_in.get() + b.plan.data_offset;
      if (any_staged_in)
        copy_ranges(b, [&](std::size_t i, std::size_t from, std::size_t n) {
          if (!b.direct_in[i]) std::memcpy(in_data + b.offsets[i] + from, b.ops[i]->in + from, n);
        });

      const cudaStream_t st = s.stream.get();
      check_cuda(cudaSetDevice(s.dev->device), "cudaSetDevice");
      for (std::uint32_t k : uploads)
        check_cuda(cudaMemcpyAsync(s.d_keys.get() + k * sizeof(KeyBlob), s.h_keys.get() + k * sizeof(KeyBlob),
                                   sizeof(KeyBlob), cudaMemcpyHostToDevice, st),
                   "copying key material to the GPU");
      // The header always goes through staging; the data area only if some op needs it (a mixed
      // batch uploads it whole, and the direct copies that follow in stream order overwrite the
      // direct ops' parts of it).
      if (!mapped)
        check_cuda(cudaMemcpyAsync(s.d_in.get(), s.h_in.get(), any_staged_in ? b.plan.upload_bytes() : b.plan.data_offset,
                                   cudaMemcpyHostToDevice, st),
                   "copying the batch to the GPU");
      unsigned char* d_in_data = s.d_in.get() + b.plan.data_offset;
      if (!direct)
      for_each_run(b, b.direct_in, [&](std::size_t i) { return b.ops[i]->in; },
                   [&](std::size_t i, std::size_t count, std::size_t stride) {
                     const std::size_t len = b.ops[i]->len, pitch = padded_len(len);
                     check_cuda(count == 1 ? cudaMemcpyAsync(d_in_data + b.offsets[i], b.ops[i]->in, len,
                                                             cudaMemcpyHostToDevice, st)
                                           : cudaMemcpy2DAsync(d_in_data + b.offsets[i], pitch, b.ops[i]->in, stride,
                                                               len, count, cudaMemcpyHostToDevice, st),
                                "copying chunks to the GPU");
                   });
      const std::size_t n = b.ops.size();
      b.out_data_offset = align256(n * (sizeof(Block128) + sizeof(std::uint32_t)));
      BatchView view;
      view.descs = s.d_in.get<ChunkDesc>();
      view.chunks = static_cast<std::uint32_t>(n);
      view.ctr_task_prefix = reinterpret_cast<const std::uint32_t*>(s.d_in.get() + b.plan.task_prefix_offset);
      view.ctr_tasks = b.plan.ctr_tasks;
      view.ctr_data_tasks = b.plan.ctr_data_tasks;
      view.segment_blocks = b.plan.segment_blocks;
      view.segment_prefix = reinterpret_cast<const std::uint32_t*>(s.d_in.get() + b.plan.segment_prefix_offset);
      view.segments = b.plan.segments;
      view.keys = s.d_keys.get<KeyBlob>();
      view.in = s.d_in.get() + b.plan.data_offset;
      view.out = s.d_out.get() + b.out_data_offset;
      view.tags = s.d_out.get<Block128>();
      view.ok = reinterpret_cast<std::uint32_t*>(s.d_out.get() + n * sizeof(Block128));
      view.scratch = reinterpret_cast<ChunkScratch*>(s.d_in.get() + b.plan.scratch_offset);
      view.open = !b.seal;
      const int sms = s.dev->launch_sms;
      if (mapped) {  // results straight into the pinned result area that complete() reads
        view.direct = true;
        view.tags = s.h_out.get<Block128>();
        view.ok = reinterpret_cast<std::uint32_t*>(s.h_out.get() + n * sizeof(Block128));
        view.scratch = s.d_scratch.get<ChunkScratch>();
        thread_local DirectHeader h;
        std::memcpy(h.descs, direct_header.data(), n * sizeof(ChunkDesc));
        std::memcpy(h.ctr_task_prefix, direct_header.data() + b.plan.task_prefix_offset, (n + 1) * sizeof(std::uint32_t));
        std::memcpy(h.segment_prefix, direct_header.data() + b.plan.segment_prefix_offset, (n + 1) * sizeof(std::uint32_t));
        check_cuda(launch_fused_direct(view, h, &s.barrier_count, s.dev->tables, sms, st), "launching the AES-GCM kernel");
        check_cuda(cudaEventRecord(s.done.get(), st), "cudaEventRecord");
        return true;
      }
      if (direct) {  // header on the GPU (uploaded above, scratch zeroed), data and results over the bus
        view.direct = true;
        view.tags = s.h_out.get<Block128>();
        view.ok = reinterpret_cast<std::uint32_t*>(s.h_out.get() + n * sizeof(Block128));
        check_cuda(launch_fused(view, s.dev->tables, sms, st), "launching the AES-GCM kernel");
        check_cuda(cudaEventRecord(s.done.get(), st), "cudaEventRecord");
        return true;
      }
      check_cuda(fused     ? launch_fused(view, s.dev->tables, sms, st)
                 : b.seal ? launch_seal(view, v, task_blocks, s.dev->tables, sms, st)
                          : launch_open(view, v, task_blocks, s.dev->tables, sms, st),
                 "launching the AES-GCM kernels");
      check_cuda(cudaMemcpyAsync(s.h_out.get(), s.d_out.get(),
                                 b.out_data_offset + (b.any_staged_out ? b.plan.data_bytes : 0),
                                 cudaMemcpyDeviceToHost, st),
                 "copying the results from the GPU");
      const unsigned char* d_out_data = s.d_out.get() + b.out_data_offset;
      for_each_run(b, b.direct_out, [&](std::size_t i) { return b.ops[i]->out; },
                   [&](std::size_t i, std::size_t count, std::size_t stride) {
                     const std::size_t len = b.ops[i]->len, pitch = padded_len(len);
                     check_cuda(count == 1 ? cudaMemcpyAsync(b.ops[i]->out, d_out_data + b.offsets[i], len,
                                                             cudaMemcpyDeviceToHost, st)
                                           : cudaMemcpy2DAsync(b.ops[i]->out, stride, d_out_data + b.offsets[i], pitch,
                                                               len, count, cudaMemcpyDeviceToHost, st),
                                "copying chunks from the GPU");
                   });
      check_cuda(cudaEventRecord(s.done.get(), st), "cudaEventRecord");
      return true;
    } catch (const std::exception& e) {
      fail(s, e.what());
      return false;
    }
  }

  bool complete(Batch& b) {
    Slot& s = *b.slot;
    try {
      check_cuda(cudaSetDevice(s.dev->device), "cudaSetDevice");
      const auto deadline = Clock::now() + (b.spin ? options_.spin : std::chrono::microseconds(0));
      cudaError_t e;
      while ((e = cudaEventQuery(s.done.get())) == cudaErrorNotReady && Clock::now() < deadline) {
      }
      if (e == cudaErrorNotReady) e = cudaEventSynchronize(s.done.get());
      check_cuda(e, "running the AES-GCM batch");
      const std::size_t n = b.ops.size();
      const auto* tags = s.h_out.get<Block128>();
      const auto* ok = reinterpret_cast<const std::uint32_t*>(s.h_out.get() + n * sizeof(Block128));
      const unsigned char* data = s.h_out.get() + b.out_data_offset;
      for (std::size_t i = 0; i < n; ++i) {
        ChunkOp& op = *b.ops[i];
        if (b.seal) std::memcpy(op.tag.data(), tags[i].w, kChunkTagBytes);
        op.ok = b.seal || ok[i] == 1;
      }
      for (std::size_t i = 0; i < n; ++i)  // the GPU zeroed it too; never trust a copy for that
        if (b.direct_out[i] && !b.ops[i]->ok && b.ops[i]->len) std::memset(b.ops[i]->out, 0, b.ops[i]->len);
      if (b.any_staged_out)
        copy_ranges(b, [&](std::size_t i, std::size_t from, std::size_t len) {
          ChunkOp& op = *b.ops[i];
          if (b.direct_out[i]) return;
          if (op.ok) std::memcpy(op.out + from, data + b.offsets[i] + from, len);
          else std::memset(op.out + from, 0, len);
        });
      return true;
    } catch (const std::exception& e) {
      fail(s, e.what());
      return false;
    }
  }

  // Which ops the GPU copies directly. Output goes direct only when it does not overlap the input:
  // should the batch fail after the copy back began, the fallback engine redoes it from op.in,
  // which must still hold the input.
  void classify_direct(Batch& b) {
    const std::size_t n = b.ops.size();
    b.direct_in.assign(n, 0);
    b.direct_out.assign(n, 0);
    b.any_staged_out = false;
    b.all_direct = true;
    auto reg = pinned_->lock();
    for (std::size_t i = 0; i < n; ++i) {
      const ChunkOp& op = *b.ops[i];
      if (op.len == 0) continue;
      b.direct_in[i] = pinned_->buffer_of_locked(op.in, op.len);
      // In place (out overlaps in), the copies are still direct: the stream copies the input to
      // the GPU before the kernel runs and the result back after it. Only the zero-copy kernel
      // (all_direct) must not: it writes the plaintext over the ciphertext that its GHASH reads
      // afterwards. (Staging the result instead cost a host copy of every in-place read: 8 streams
      // reading through the mount on the H100, gpu engine, 6.0 to 6.6 GB/s at 0.83 to 0.94 daemon
      // CPU s/GB; with the copies direct, 8.2 to 9.5 GB/s at 0.53 to 0.64.)
      const bool disjoint = op.out + op.len <= op.in || op.in + op.len <= op.out;
      b.direct_out[i] = pinned_->buffer_of_locked(op.out, op.len);
      b.any_staged_out |= !b.direct_out[i];
      const bool aligned = ((reinterpret_cast<std::uintptr_t>(op.in) | reinterpret_cast<std::uintptr_t>(op.out)) & 3) == 0;
      b.all_direct = b.all_direct && disjoint && b.direct_in[i] && b.direct_out[i] && aligned;
    }
  }

  // Groups consecutive direct ops of equal length whose host addresses advance by one stride (the
  // chunks of one request in one scratch buffer) into runs, so a run costs one 2D copy, one driver
  // call, instead of one per chunk. emit(first op, count, stride); stride is unused for count 1.
  // A run stays inside one pinned buffer: a 2D copy whose rows lie in two callers' buffers spans
  // the memory between them, which the driver refuses ("invalid argument": seen on the H100 with
  // eight callers' 256 KiB chunks gathered into one batch).
  template <class Ptr, class Emit>
  static void for_each_run(const Batch& b, const std::vector<std::uintptr_t>& direct, Ptr ptr, Emit emit) {
    const std::size_t n = b.ops.size();
    for (std::size_t i = 0; i < n;) {
      if (!direct[i]) {
        ++i;
        continue;
      }
      const std::size_t len = b.ops[i]->len;
      std::size_t j = i + 1, stride = 0;
      for (; j < n && direct[j] == direct[i] && b.ops[j]->len == len; ++j) {
        const auto a = reinterpret_cast<std::uintptr_t>(ptr(j)), prev = reinterpret_cast<std::uintptr_t>(ptr(j - 1));
        if (a <= prev || a - prev < len) break;  // the 2D copy needs a forward pitch of at least len
        if (j == i + 1) stride = a - prev;
        else if (a - prev != stride) break;
      }
      emit(i, j - i, stride);
      i = j;
    }
  }

  // Copies in and out of the pinned buffers run on several threads once a batch is large enough
  // to repay waking them (measured: from 128 KiB it cost a mounted daemon CPU time and a 1 MiB
  // request latency): one core's memcpy is far slower than the PCIe link. Ops are cut into
  // pieces of at most 32 KiB so that a few large chunks still spread. f(op, offset, length).
  template <class F>
  void copy_ranges(const Batch& b, F&& f) {
    constexpr std::size_t kPiece = 32u << 10;
    if (!copy_pool_ || b.plan.data_bytes < (512u << 10)) {
      for (std::size_t i = 0; i < b.ops.size(); ++i)
        if (b.ops[i]->len) f(i, 0, b.ops[i]->len);
      return;
    }
    std::vector<std::pair<std::uint32_t, std::uint32_t>> pieces;  // (op, piece index)
    for (std::size_t i = 0; i < b.ops.size(); ++i)
      for (std::size_t p = 0; p * kPiece < b.ops[i]->len; ++p)
        pieces.emplace_back(static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(p));
    copy_pool_->parallel_for(pieces.size(), [&](std::size_t k) {
      const auto [i, p] = pieces[k];
      const std::size_t from = std::size_t{p} * kPiece;
      f(i, from, std::min(kPiece, b.ops[i]->len - from));
    });
  }

  // A GPU that fails is taken out of use: its free slots leave the pool, and its batches in flight,
  // once they fail too, go back to the queue for the GPUs left. When none is left, everything from
  // here on runs on the fallback. Reported once per GPU.
  void fail(Slot& s, const std::string& what) {
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

  void run_fallback(std::span<ChunkOp> ops, bool seal) { seal ? fallback_.seal(ops) : fallback_.open(ops); }

  // Called with the lock held; releases it while the fallback works. A batch that failed on one GPU
  // while others are left goes back to the front of the queue instead (the inputs are untouched:
  // a direct output never overlaps its input), and one of the other GPUs takes it.
  void finish_on_fallback(std::unique_lock<std::mutex>& lock, Batch& b) {
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

  void finish_slot(Slot* slot, bool reusable) {
    if (slot && reusable && !slot->dev->broken) free_.push_back(slot);
  }

  void finish(Batch& b, bool slot_reusable) {
    finish_slot(b.slot, slot_reusable);
    for (auto& p : b.pieces)
      if (--p.request->pending == 0) wake_later(p.request);
  }

  std::optional<ResidentPause> teardown_pause_;  // first member: the last one freed
  GpuOptions options_;
  ChunkEngine& fallback_;
  bool auto_kernel_ = true;
  bool upload_wc_ = false;
  CtrVariant variant_ = CtrVariant::Coarse;
  std::size_t max_data_ = 0, piece_limit_ = 0;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::vector<std::unique_ptr<Slot>> slots_;
  HostKeyCache host_keys_;
  std::shared_ptr<PinnedRegistry> pinned_ = shared_pinned_registry();
  std::unique_ptr<ThreadPool> copy_pool_;
  std::vector<std::unique_ptr<ResidentQueue>> residents_;  // one per GPU (GpuOptions::resident)
  std::atomic<std::size_t> next_resident_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> queue_;
  std::deque<Slot*> free_;
  bool disabled_ = false;               // every GPU failed
  std::atomic<bool> lost_{false};       // disabled_, for degraded() without the lock
  std::size_t active_requests_ = 0;  // callers inside run()
  std::atomic<int> launches_{0};
};

}  // namespace
}  // namespace gpu

bool gpu_support_compiled() { return true; }

GpuLaunchCounters gpu_launch_counters() {
  return {gpu::g_launches.load(std::memory_order_relaxed), gpu::g_pieces.load(std::memory_order_relaxed),
          gpu::g_requests.load(std::memory_order_relaxed)};
}

int gpu_numa_node(int device) {
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return numa::node_of_pci_device(bus_id);
}

bool bind_thread_near_gpu(int device) {
  if (numa::online_nodes() < 2) return false;
  return numa::bind_thread_to_cpus(numa::cpus_of_node(gpu_numa_node(device)));
}

std::vector<GpuInfo> list_gpus(std::string* why_none) {
  std::vector<GpuInfo> out;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why_none) {
      // The runtime says "insufficient driver" both when there is no driver at all and when it
      // is too old: the driver probe tells the two apart.
      const std::string driver = describe_driver_problem(probe_nvidia_driver(), CUDART_VERSION);
      if (e == cudaErrorNoDevice) *why_none = "no NVIDIA GPU found (the NVIDIA driver is installed but sees none)";
      else if (!driver.empty()) *why_none = driver;
      else if (e == cudaErrorInsufficientDriver)
        *why_none = "the NVIDIA driver is too old for this build (CUDA " + cuda_version_text(CUDART_VERSION) + ")";
      else *why_none = std::string("the CUDA driver cannot be used (") + cudaGetErrorString(e) + ")";
    }
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.sm_count = p.multiProcessorCount;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.memory_bytes = p.totalGlobalMem;
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i) == cudaSuccess) g.pci_bus_id = bus_id;
    g.numa_node = numa::node_of_pci_device(g.pci_bus_id);
    out.push_back(g);
  }
  if (out.empty() && why_none) *why_none = "no NVIDIA GPU found (the NVIDIA driver is installed but sees none)";
  return out;
}

std::unique_ptr<ChunkEngine> make_gpu_engine(const GpuOptions& options, ChunkEngine& fallback) {
  std::string why;
  const auto gpus = list_gpus(&why);
  if (gpus.empty()) throw UserError("the gpu engine cannot run: " + why);
  std::vector<int> devices = options.devices;
  if (devices.empty())
    for (const auto& g : gpus) devices.push_back(g.index);
  for (int d : devices)
    if (d < 0 || d >= static_cast<int>(gpus.size()))
      throw UserError("GPU " + std::to_string(d) + " does not exist (this machine has " + std::to_string(gpus.size()) +
                      " visible GPU(s))");
  GpuOptions o = options;
  // For comparisons on one machine without a rebuild: GPUCRYPTFS_GPU_RESIDENT=0 turns the resident
  // worker off (GpuOptions::resident), =1 on.
  if (const char* r = std::getenv("GPUCRYPTFS_GPU_RESIDENT"); r && (r[0] == '0' || r[0] == '1')) o.resident = r[0] == '1';
  // GPUCRYPTFS_RESIDENT_PARTS=N: at most N CTAs per chunk (GpuOptions::resident_max_parts; 1 never splits).
  if (const char* p = std::getenv("GPUCRYPTFS_RESIDENT_PARTS"); p && std::atoi(p) > 0) o.resident_max_parts = std::atoi(p);
  try {
    return std::make_unique<gpu::GpuEngine>(o, fallback, devices);
  } catch (const gpu::CudaError& e) {
    throw UserError(std::string("the gpu engine cannot start: ") + e.what());
  }
}

}  // namespace gcfs
