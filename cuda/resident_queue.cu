// The resident worker's host side: see resident_queue.h.
#include "cuda/resident_queue.h"

#include <immintrin.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "crypto/diagnostics.h"
#include "cuda/thread_waiter.h"

namespace gcfs::gpu {
namespace {

using Clock = std::chrono::steady_clock;

// Every queue of the process, for ResidentPause.
struct Registry {
  std::mutex mu;
  std::set<ResidentQueue*> queues;
  std::atomic<int> pauses{0};
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: queues may outlive static destruction order
  return *r;
}

std::uint64_t fingerprint(const ChunkKey& k) {
  std::uint64_t h;
  std::memcpy(&h, k.data(), sizeof h);  // keys are uniformly random
  return h;
}

struct Control {
  std::uint32_t stop;
  std::uint32_t pad[31];
  std::uint64_t published;      // tickets posted so far (its own 128-byte line)
  std::uint64_t pad2[15];
  std::uint64_t device_words[3];  // copied to the device's three words before each start
};

}  // namespace

// The one poller thread of the process, for every queue (every GPU): one pass over the queues after
// another while any has work, asleep while none has. A poller thread spins while the GPU works,
// and one per GPU made a second GPU cost the daemon a core more for the same work.
class SharedPoller {
 public:
  // The poller of a GPU's queue: the process's one, or with GPUCRYPTFS_RESIDENT_POLLERS=gpu (for
  // comparisons) one per GPU.
  static SharedPoller& get(int device) {
    static const bool per_gpu = [] {
      const char* e = std::getenv("GPUCRYPTFS_RESIDENT_POLLERS");
      return e && std::strcmp(e, "gpu") == 0;
    }();
    static std::mutex mu;
    static auto* pollers = new std::map<int, SharedPoller*>;  // never destroyed: each thread ends with its last queue
    std::lock_guard lock(mu);
    SharedPoller*& p = (*pollers)[per_gpu ? device : 0];
    if (!p) p = new SharedPoller;
    return *p;
  }
  void add(ResidentQueue* q) {
    std::lock_guard life(life_mu_);
    {
      Waiting w(waiting_);
      std::lock_guard lock(list_mu_);
      queues_.push_back(q);
      quit_ = false;
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  // After this the thread never touches q again; the last queue's removal ends the thread.
  void remove(ResidentQueue* q) {
    std::lock_guard life(life_mu_);
    bool last;
    {
      Waiting w(waiting_);
      std::lock_guard lock(list_mu_);
      std::erase(queues_, q);
      last = queues_.empty();
      quit_ = last;
    }
    if (last && thread_.joinable()) {
      word_.fetch_add(1);
      futex_wake(word_);
      thread_.join();
    }
  }
  // A queue took work: wakes the thread if it sleeps (its sleep checks every queue's in-flight
  // count after announcing it, and the queue counts its work before calling this).
  void wake() {
    if (sleeping_.load()) {
      word_.fetch_add(1);
      futex_wake(word_);
    }
  }

 private:
  void loop() {
    pthread_setname_np(pthread_self(), "gcfs-resident");
    for (;;) {
      bool busy = false, timed = false;
      auto sleep = std::chrono::nanoseconds::max();
      {
        std::lock_guard lock(list_mu_);
        if (quit_) return;
        const auto now = Clock::now();
        for (ResidentQueue* q : queues_) {
          std::chrono::nanoseconds stop_in{0};
          if (q->poll_once(now, &stop_in) == ResidentQueue::PollState::Busy) busy = true;
          else if (stop_in.count() > 0) timed = true, sleep = std::min(sleep, stop_in);
        }
      }
      if (busy) {
        if (waiting_.load(std::memory_order_relaxed) > 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
        else for (int i = 0; i < 32; ++i) _mm_pause();
        continue;
      }
      // Every queue is quiet: sleep until a request comes, or until a running kernel's idle stop.
      const std::uint32_t word = word_.load();
      sleeping_.store(true);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      bool idle = true;
      {
        std::lock_guard lock(list_mu_);
        idle = !quit_;
        for (ResidentQueue* q : queues_) idle = idle && q->in_flight_.load() == 0;
      }
      if (idle) futex_wait(word_, word, timed ? &sleep : nullptr);
      sleeping_.store(false);
    }
  }

  // Counts a thread waiting for list_mu_, so that a busy loop lets it in (a mutex released and
  // taken again at once may never be handed over).
  struct Waiting {
    explicit Waiting(std::atomic<int>& n) : n_(n) { n_.fetch_add(1); }
    ~Waiting() { n_.fetch_sub(1); }
    std::atomic<int>& n_;
  };
  std::atomic<int> waiting_{0};
  std::mutex life_mu_;  // add and remove one at a time: the thread's start and join
  std::mutex list_mu_;  // queues_ and quit_; the thread holds it for each pass
  std::vector<ResidentQueue*> queues_;
  bool quit_ = false;
  std::atomic<std::uint32_t> word_{0};  // futex: bumped when work arrives for a sleeping thread
  std::atomic<bool> sleeping_{false};
  std::thread thread_;
};

// One caller's request: how many of its entries the GPU has not answered yet, and whom to wake.
struct ResidentQueue::Pending {
  std::atomic<std::size_t> left{0};
  std::atomic<bool> failed{false};
  std::shared_ptr<Waiter> waiter = this_thread_waiter();
};

ResidentQueue::ResidentQueue(int device, const DeviceTables& tables, ResidentOptions options, KeyMaterial key_material)
    : device_(device),
      tables_(tables),
      options_(std::move(options)),
      key_material_(std::move(key_material)),
      stream_(device),
      upload_stream_(device),
      ring_(options_.ring_entries * sizeof(ResidentEntry)),
      control_(sizeof(Control)),
      key_staging_(sizeof(KeyBlob)),
      next_ticket_(device, 3 * sizeof(unsigned long long)),
      keys_(device, options_.key_slots * sizeof(KeyBlob)),
      text_(device, static_cast<std::size_t>(options_.ctas) * kMaxGpuChunkBytes),
      stage_(device, static_cast<std::size_t>(options_.ctas) * kMaxGpuChunkBytes),
      part_sums_(device, options_.ring_entries * sizeof(ChunkScratch)),
      info_(options_.ring_entries),
      slots_(options_.key_slots),
      slot_refs_(new std::atomic<int>[options_.key_slots]) {
  trace_ = std::getenv("GPUCRYPTFS_RESIDENT_TRACE") != nullptr;
  if (options_.ring_entries == 0 || (options_.ring_entries & (options_.ring_entries - 1)))
    throw std::invalid_argument("resident ring size must be a power of two");
  for (std::size_t i = 0; i < options_.key_slots; ++i) slot_refs_[i].store(0);
  std::memset(ring_.get(), 0, ring_.size());
  std::memset(control_.get(), 0, control_.size());
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  options_.max_parts = std::clamp<int>(options_.max_parts, 1, static_cast<int>(kResidentMaxParts));
  options_.min_part_segments = std::max<std::uint32_t>(options_.min_part_segments, 1);
  // The split chunks' sums start at zero, and each chunk's last part leaves its sum zero again.
  check_cuda(cudaMemsetAsync(part_sums_.get(), 0, part_sums_.size(), stream_.get()), "clearing the resident worker's sums");
  check_cuda(cudaStreamSynchronize(stream_.get()), "clearing the resident worker's sums");
  {
    std::lock_guard lock(registry().mu);
    registry().queues.insert(this);
  }
  last_work_ = last_check_ = Clock::now();
  poller_ = &SharedPoller::get(device_);
  poller_->add(this);
}

ResidentQueue::~ResidentQueue() {
  {
    std::lock_guard lock(registry().mu);
    registry().queues.erase(this);
  }
  poller_->remove(this);
  if (trace_ && trace_n_) {
    char line[320];
    std::snprintf(line, sizeof line,
                  "resident worker, GPU %d: %llu chunks, mean us: round trip %.1f, CTR %.1f, mask %.1f, GHASH %.1f, "
                  "fence %.1f; %llu starts",
                  device_, static_cast<unsigned long long>(trace_n_), trace_round_trip_ / trace_n_ * 1e6,
                  trace_ctr_ / trace_n_ * 1e6, trace_mask_ / trace_n_ * 1e6, trace_ghash_ / trace_n_ * 1e6,
                  trace_fence_ / trace_n_ * 1e6, static_cast<unsigned long long>(starts_.load()));
    diag::info(line);
  }
  std::lock_guard lock(mu_);
  if (running_) stop_kernel();
}

bool ResidentQueue::take_key_slots(std::span<ChunkOp> ops, std::span<const std::uint32_t> parts,
                                   std::vector<std::uint32_t>& slots) {
  slots.resize(ops.size());
  thread_local std::vector<std::uint32_t> taken;  // no allocation per request
  taken.clear();
  auto give_back = [&] {
    for (std::uint32_t s : taken) slot_refs_[s].fetch_sub(1);
  };
  const ChunkKey* last = nullptr;
  std::uint32_t last_slot = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].key == last) {
      slots[i] = last_slot;
      continue;
    }
    const ChunkKey& key = *ops[i].key;
    std::uint32_t slot = UINT32_MAX;
    if (auto it = slot_of_.find(fingerprint(key)); it != slot_of_.end() && slots_[it->second].key == key) slot = it->second;
    if (slot == UINT32_MAX) {
      // A slot no op in flight uses (least recently used first), loaded on the side stream; the
      // kernel reads key material through L2 only, so the new key is what it sees.
      for (std::uint32_t s = 0; s < slots_.size(); ++s)
        if (slot_refs_[s].load() == 0 && (slot == UINT32_MAX || !slots_[s].used ||
                                          (slots_[slot].used && slots_[s].last_use < slots_[slot].last_use)))
          slot = s;
      if (slot == UINT32_MAX) {
        give_back();
        return false;
      }
      if (slots_[slot].used) slot_of_.erase(fingerprint(slots_[slot].key));
      const auto blob = key_material_(key);
      std::memcpy(key_staging_.get(), blob->data(), sizeof(KeyBlob));
      check_cuda(cudaMemcpyAsync(keys_.get() + slot * sizeof(KeyBlob), key_staging_.get(), sizeof(KeyBlob),
                                 cudaMemcpyHostToDevice, upload_stream_.get()),
                 "copying key material to the GPU");
      check_cuda(cudaStreamSynchronize(upload_stream_.get()), "copying key material to the GPU");
      secure_wipe(key_staging_.get(), sizeof(KeyBlob));
      slots_[slot].key = key;
      slots_[slot].used = true;
      slots_[slot].generation = ++key_loads_;
      slot_of_[fingerprint(key)] = slot;
    }
    slots_[slot].last_use = ++uses_;
    slot_refs_[slot].fetch_add(1);
    taken.push_back(slot);
    slots[i] = last_slot = slot;
    last = ops[i].key;
  }
  // One reference per entry, not per distinct key (an op split in n parts has n entries): the
  // poller gives one back per answered entry. The loop above took one for each run of a key.
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (const int more = static_cast<int>(parts[i]) - (i > 0 && ops[i].key == ops[i - 1].key ? 0 : 1); more > 0)
      slot_refs_[slots[i]].fetch_add(more);
  return true;
}

// How many CTAs one op goes to, given how many each chunk of the request may have: at most
// per_chunk, none in place (the result waits in device memory until its tag is checked), and every
// part at least min_part_segments GHASH segments.
std::uint32_t ResidentQueue::parts_for(const ChunkOp& op, std::uint32_t per_chunk) const {
  if (per_chunk <= 1 || op.in == op.out) return 1;
  const std::uint32_t segs = ghash_segments(static_cast<std::uint32_t>(op.aad_len), static_cast<std::uint32_t>(op.len),
                                            kSegmentBlocksSmall);  // a split chunk's segments
  return std::max<std::uint32_t>(1, std::min(per_chunk, segs / options_.min_part_segments));
}

ResidentQueue::Outcome ResidentQueue::run(std::span<ChunkOp> ops, bool seal) {
  if (ops.empty()) return Outcome::Done;
  Pending req;
  {
    std::unique_lock lock(mu_);
    if (failed_.load() || registry().pauses.load() > 0) return Outcome::NotTaken;
    // While under a quarter of the CTAs hold an entry, the rest of that quarter is shared out over
    // this request's chunks: with few callers a chunk's parts run side by side. Beyond it, every
    // chunk takes one CTA: with many CTAs busy the parts took as long as whole chunks (the bus, not
    // the SMs, sets the pace), and on a host with a slower bus splitting up to half of the CTAs
    // lost 8% at 8 and 16 callers of 128 KiB (two callers: 28 to 70% faster, whatever the host).
    const std::size_t busy = in_flight_.load(), budget = static_cast<std::size_t>(options_.ctas) / 4;
    const std::size_t spare = busy < budget ? budget - busy : 0;
    const auto per_chunk = static_cast<std::uint32_t>(std::min<std::size_t>(options_.max_parts, spare / ops.size()));
    thread_local std::vector<std::uint32_t> parts;  // no allocation per request
    parts.resize(ops.size());
    std::size_t entries = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) entries += parts[i] = parts_for(ops[i], per_chunk);
    if (busy + entries > options_.ring_entries / 2) return Outcome::NotTaken;
    thread_local std::vector<std::uint32_t> slots;  // no allocation per request
    try {
      if (!take_key_slots(ops, parts, slots)) return Outcome::NotTaken;
      ensure_running();
    } catch (const CudaError& e) {
      // Ops already in flight are answered by the poller, which finds the kernel gone.
      if (!failed_.exchange(true) && options_.on_error)
        options_.on_error("GPU " + std::to_string(device_) + " resident worker failed (" + e.what() +
                          "); its requests take the ordinary path");
      return Outcome::Failed;
    }
    req.left.store(entries);
    req.waiter->arm();
    auto* ring = ring_.get<ResidentEntry>();
    const std::uint64_t mask = options_.ring_entries - 1;
    in_flight_.fetch_add(entries);
    for (std::size_t i = 0; i < ops.size(); ++i)
    for (std::uint32_t part = 0; part < parts[i]; ++part) {
      const std::uint64_t t = next_++;
      EntryInfo& info = info_[t & mask];
      while (info.busy.load(std::memory_order_acquire)) _mm_pause();  // a slow entry a lap behind
      const ChunkOp& op = ops[i];
      ResidentEntry& e = ring[t & mask];
      ChunkDesc& d = e.desc;
      d.key = slots[i];
      std::memcpy(d.nonce, op.nonce.data(), kChunkNonceBytes);
      const std::uint64_t gen = slots_[slots[i]].generation;
      d.data_offset = static_cast<std::uint32_t>(gen);
      d.len = static_cast<std::uint32_t>(op.len);
      d.aad_len = static_cast<std::uint32_t>(op.aad_len);
      d.reserved = (seal ? 0 : kResidentOpen) | static_cast<std::uint32_t>(gen >> 32) << 1;
      d.host_in = reinterpret_cast<std::uint64_t>(op.in);
      d.host_out = reinterpret_cast<std::uint64_t>(op.out);
      e.flags = (op.out == op.in ? kResidentInPlace : 0) |
                (parts[i] > 1 ? resident_part_flags(part, parts[i]) : 0);
      if (seal) std::memset(d.expected_tag.w, 0, kChunkTagBytes);
      else std::memcpy(d.expected_tag.w, op.tag.data(), kChunkTagBytes);
      std::memset(d.aad, 0, sizeof d.aad);
      if (op.aad_len) std::memcpy(d.aad, op.aad, op.aad_len);
      info.op = &ops[i];
      info.request = &req;
      info.slot = slots[i];
      info.part = part;
      info.parts = parts[i];
      if (trace_) info.posted_at = Clock::now();
      info.busy.store(true, std::memory_order_relaxed);
      std::atomic_ref<std::uint64_t>(e.posted).store(t + 1, std::memory_order_release);
    }
    // Read by the GPU (the CTA waiting for the next ticket) and by the poller.
    std::atomic_ref<std::uint64_t>(control_.get<Control>()->published).store(next_, std::memory_order_release);
  }
  poller_->wake();
  std::atomic_thread_fence(std::memory_order_seq_cst);  // arm() above comes before this check
  // Counted for the whole wait: a caller polls only while few wait at all (with many, the cores
  // are better left to them; counting only the callers that were polling kept two of them polling
  // whatever the load, a third of the host's samples at 32 callers).
  if (callers_.fetch_add(1, std::memory_order_relaxed) < options_.spin_callers) {
    const auto deadline = Clock::now() + options_.linger;
    for (int i = 0; req.left.load(std::memory_order_acquire) != 0; ++i) {
      _mm_pause();
      if ((i & 63) == 0 && Clock::now() > deadline) break;
    }
  }
  while (req.left.load(std::memory_order_acquire) != 0) {
    req.waiter->wait();
    req.waiter->arm();
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  callers_.fetch_sub(1, std::memory_order_relaxed);
  return req.failed.load() ? Outcome::Failed : Outcome::Done;
}

void ResidentQueue::ensure_running() {
  if (running_) return;
  auto* c = control_.get<Control>();
  std::atomic_ref<std::uint32_t>(c->stop).store(0, std::memory_order_release);
  c->device_words[0] = next_;  // next ticket
  c->device_words[1] = next_;  // published
  c->device_words[2] = 0;      // stopping
  ResidentView v;
  v.ring = ring_.get<ResidentEntry>();
  v.ring_mask = options_.ring_entries - 1;
  v.next_ticket = next_ticket_.get<unsigned long long>();
  v.stop = &c->stop;
  v.published = &c->published;
  v.keys = keys_.get<KeyBlob>();
  v.text = text_.get();
  v.stage = stage_.get();
  v.part_sums = part_sums_.get<ChunkScratch>();
  v.trace = trace_;
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  check_cuda(cudaMemcpyAsync(v.next_ticket, c->device_words, sizeof c->device_words, cudaMemcpyHostToDevice, stream_.get()),
             "starting the resident worker");
  check_cuda(launch_resident(v, tables_, options_.ctas, stream_.get()), "starting the resident worker");
  running_ = true;
  starts_.fetch_add(1);
}

void ResidentQueue::stop_kernel() {
  auto* c = control_.get<Control>();
  std::atomic_ref<std::uint32_t>(c->stop).store(1, std::memory_order_release);
  cudaSetDevice(device_);
  const cudaError_t e = cudaStreamSynchronize(stream_.get());
  running_ = false;
  if (e != cudaSuccess && !failed_.exchange(true) && options_.on_error)
    options_.on_error(std::string("GPU ") + std::to_string(device_) + " resident worker failed (" + cudaGetErrorString(e) +
                      "); its requests take the ordinary path");
}

void ResidentQueue::drain_and_stop() {
  std::unique_lock lock(mu_);
  while (in_flight_.load() > 0) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    lock.lock();
  }
  if (running_) stop_kernel();
}

bool ResidentQueue::collect() {
  const std::uint64_t published =
      std::atomic_ref<std::uint64_t>(control_.get<Control>()->published).load(std::memory_order_acquire);
  const std::uint64_t mask = options_.ring_entries - 1;
  auto* ring = ring_.get<ResidentEntry>();
  bool progress = false;
  const auto is_done = [&](std::uint64_t t) {
    return std::atomic_ref<std::uint64_t>(ring[t & mask].done).load(std::memory_order_acquire) == t + 1;
  };
  for (std::uint64_t t = oldest_; t < published; ++t) {
    EntryInfo& info = info_[t & mask];
    if (!info.busy.load(std::memory_order_relaxed) || info.part != 0) continue;  // parts go with part 0
    // A split chunk is answered once every part is done: the last to finish holds the result, and
    // part 0's sum slot (and ring entry) must not be reused before then.
    const std::uint32_t n = info.parts;
    bool all = true;
    for (std::uint32_t q = 0; q < n && all; ++q) all = is_done(t + q);
    if (!all) continue;
    ResidentEntry* result = &ring[t & mask];
    for (std::uint32_t q = 0; q < n; ++q) {
      ResidentEntry& e = ring[(t + q) & mask];
      if (n > 1 && std::atomic_ref<std::uint32_t>(e.last_part).load(std::memory_order_relaxed)) result = &e;
      if (trace_) {
        trace_n_ += 1;
        trace_round_trip_ += std::chrono::duration<double>(Clock::now() - info_[(t + q) & mask].posted_at).count();
        trace_ctr_ += (e.stamps[3] - e.stamps[0]) * 1e-9;
        trace_mask_ += (e.stamps[1] - e.stamps[3]) * 1e-9;
        trace_ghash_ += (e.stamps[4] - e.stamps[1]) * 1e-9;
        trace_fence_ += (e.stamps[2] - e.stamps[4]) * 1e-9;
      }
    }
    ChunkOp& op = *info.op;
    const bool open = (result->desc.reserved & kResidentOpen) != 0;
    if (!open) std::memcpy(op.tag.data(), result->tag.w, kChunkTagBytes);
    op.ok = !open || std::atomic_ref<std::uint32_t>(result->ok).load(std::memory_order_relaxed) == 1;
    for (std::uint32_t q = 0; q < n; ++q) {
      EntryInfo& part = info_[(t + q) & mask];
      slot_refs_[part.slot].fetch_sub(1);
      answer(part);
    }
    t += n - 1;
    progress = true;
  }
  while (oldest_ < published && !info_[oldest_ & mask].busy.load(std::memory_order_relaxed)) ++oldest_;
  return progress;
}

// Poller only (the one thread that counts requests down once they are posted).
void ResidentQueue::answer(EntryInfo& info) {
  Pending* req = info.request;
  info.busy.store(false, std::memory_order_release);
  in_flight_.fetch_sub(1);
  if (req->left.load(std::memory_order_relaxed) == 1) {
    auto w = req->waiter;  // copied first: the request is gone as soon as its caller sees left == 0
    req->left.store(0, std::memory_order_seq_cst);
    w->wake();
  } else {
    req->left.fetch_sub(1, std::memory_order_relaxed);
  }
}

void ResidentQueue::fail_all(const std::string& what) {
  // The kernel is gone (or never started): every entry in flight is answered as failed, and its
  // caller redoes its ops elsewhere. Later requests are not taken.
  std::lock_guard lock(mu_);
  const bool first = !failed_.exchange(true);
  running_ = false;
  const std::uint64_t mask = options_.ring_entries - 1;
  for (std::uint64_t t = oldest_; t < next_; ++t) {
    EntryInfo& info = info_[t & mask];
    if (!info.busy.load()) continue;
    slot_refs_[info.slot].fetch_sub(1);
    info.request->failed.store(true);
    answer(info);
  }
  oldest_ = next_;
  if (first && options_.on_error)
    options_.on_error("GPU " + std::to_string(device_) + " resident worker failed (" + what +
                      "); its requests take the ordinary path");
}

ResidentQueue::PollState ResidentQueue::poll_once(Clock::time_point now, std::chrono::nanoseconds* stop_in) {
  if (collect()) {
    last_work_ = now;
    return PollState::Busy;
  }
  if (in_flight_.load() > 0) {
    // The GPU is at work: poll host memory (no CUDA call), checking now and then that the kernel
    // has not died with an error.
    if (now - last_check_ > std::chrono::milliseconds(5)) {
      last_check_ = now;
      cudaSetDevice(device_);
      const cudaError_t e = cudaStreamQuery(stream_.get());
      if (e != cudaErrorNotReady && !collect() && in_flight_.load() > 0)  // it may have ended just after answering
        fail_all(e == cudaSuccess ? "the worker ended early" : cudaGetErrorString(e));
    }
    last_work_ = now;
    return PollState::Busy;
  }
  // Nothing in flight: linger (the next request of a busy caller comes soon), then stop the kernel
  // after a quiet spell.
  if (now - last_work_ < options_.linger) return PollState::Busy;
  bool running;
  {
    std::lock_guard lock(mu_);
    running = running_;
  }
  const auto quiet = now - last_work_;
  if (running && quiet >= options_.idle_stop) {
    std::lock_guard lock(mu_);
    if (in_flight_.load() == 0 && running_) stop_kernel();
    running = false;
  }
  *stop_in = running ? std::chrono::duration_cast<std::chrono::nanoseconds>(options_.idle_stop - quiet)
                     : std::chrono::nanoseconds(0);
  return PollState::Quiet;
}

ResidentPause::ResidentPause() {
  auto& r = registry();
  r.pauses.fetch_add(1);
  std::lock_guard lock(r.mu);
  for (ResidentQueue* q : r.queues) q->drain_and_stop();
}

ResidentPause::~ResidentPause() { registry().pauses.fetch_sub(1); }

}  // namespace gcfs::gpu
