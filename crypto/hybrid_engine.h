// The engine behind `--engine auto` on a machine with GPUs: several engines at once (the cpu engine
// and one gpu engine per GPU). Written against ChunkEngine alone: it neither knows nor cares which
// member is a GPU, so it is tested with cpu engines and slowed-down or failing fakes.
//
// Members PULL work instead of being handed a predicted split. Member 0 (the cpu engine) runs in
// the callers' own threads; every other member is fed by a few feeder threads of its own. A caller
// posts its batch on one shared queue and works on it itself (member 0) while it holds one of a
// limited number of inline slots; the feeders take parts of the queued batches, oldest first,
// gathering parts of several callers' batches into one call so that a GPU gets launches large
// enough to pay. Each part's size follows the members' measured rates: a feeder takes the share
// of what is left that the model gives its member (see below), or, from a batch whose caller is
// waiting for a slot, as much as one call should carry. So the split follows the rates the members
// really reach under the load at hand, with no prediction to go wrong, and a member that fails
// simply stops pulling.
//
// Why inline slots: the cpu engine's work runs in the callers' threads, and with more callers than
// cores they would take every core, leaving the feeders (which need a core for a few microseconds
// per launch) waiting in the run queue while the GPU idles. The slots keep one core per fed member
// free; the callers beyond them wait, and their batches are what the feeders take whole.
//
// Small batches (under Options::inline_bytes, which is most of what a mounted vault sends) go
// straight to member 0 in the caller's thread, touching no shared state: a tiny batch costs what
// the cpu engine costs, plus one comparison. Batches up to Options::route_whole_max_bytes (a
// mounted vault's large requests) are not cut: each goes whole to the member the model says
// finishes it first, called in the caller's own thread, so a GPU gets them as `--engine gpu`
// would, without a feeder's hand-off.
//
// The model, per member, sizes the parts: a part of x bytes, given to a member that already has b
// bytes at work, finishes after overhead + (b + x) * seconds_per_byte. The overhead is what a lone
// small batch costs there (a GPU's launch and PCIe round trip); seconds_per_byte is the member's
// throughput under the load it actually gets. Both start from the factory's short calibration;
// seconds_per_byte then follows real parts (each part large enough is a sample: the time it took,
// less the overhead, over its bytes and the bytes it found at work there).
//
// A member that throws EngineFailure (its hardware failed; the ops' inputs are untouched) or that
// reports degraded() is retired: the log says so once, the part it failed is redone on member 0,
// and it gets no more work. The result is the same bytes either way.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "crypto/chunk_engine.h"

namespace gcfs {

struct EngineCost {
  double overhead_s = 0;        // a lone small batch's round trip
  double seconds_per_byte = 0;  // 1 / throughput under load
};

class HybridEngine final : public ChunkEngine {
 public:
  struct Member {
    ChunkEngine* engine = nullptr;  // must outlive the hybrid engine
    std::string label;              // "cpu", "gpu0", ...: for the log and `info`
    EngineCost cost;                // the starting estimate
    // Run by each of this member's feeder threads as it starts (the factory binds it to the CPUs
    // nearest the member's GPU). Unused for member 0, which runs in the callers' threads.
    std::function<void()> feeder_setup = {};
  };
  struct Options {
    // Batches smaller than this run whole on member 0 in the caller's thread. 128 KiB batches are
    // among them: there the cpu engine is the faster member by far (32 callers x 128 KiB on a
    // 16-core H200 machine: cpu 50.6 GB/s, gpu 14.3; through the queue, auto made 27.8, and random
    // 128 KiB reads through the mount 9.3 GB/s against the cpu engine's 12.2; 2026-11-26, two
    // H200s: a measured lone-batch crossover of 69 KiB put 32 callers' 128 KiB batches on the
    // queue, and auto made 42 GB/s against the cpu engine's 83).
    std::size_t inline_bytes = 256u << 10;
    // A batch of at most this many bytes whose caller is the only one in the engine runs whole on
    // member 0 (0: off). A lone batch is latency: the cpu engine spreads it over every core at
    // once, and a part sent to a GPU ends later (a mounted vault's single stream read 7% slower
    // with 1 MiB batches shared than on the cpu engine alone, on the 16-core H200 machine). The
    // mount leaves it off: there the cores are busy with the FUSE path as well, and a lone stream's
    // requests shared with the GPU went 1.1x faster than kept on the cpu engine (H100 machine).
    std::size_t lone_inline_bytes = 0;
    // A fed member takes no part smaller than this from a batch that someone else works on too.
    std::size_t min_part_bytes = 64u << 10;
    // The most one feeder call carries (gathered over several batches).
    std::size_t max_part_bytes = 8u << 20;
    // What a caller takes of its own batch at a time for member 0 (the cpu engine spreads each
    // such part over its threads).
    std::size_t inline_part_bytes = 1u << 20;
    // Callers that may work on member 0 at once (batches of inline_bytes and more): -1 for the
    // cores less one per fed member (at least one); 0 for none, so that fed members do all of it
    // while any is left (tests).
    int inline_slots = -1;
    // Feeder threads per fed member: enough to keep a GPU's streams busy while one of them is
    // waiting for its batch.
    int feeders = 3;
    // The member whose allocate_io_buffer the callers get (a GPU's page-locked memory serves the
    // cpu engine as well as any other memory, and lets the GPU skip its staging copies).
    std::size_t buffer_member = 0;
    // A caller that holds a slot starts with member 0's share by the model and leaves the rest
    // queued while a fed member has a feeder idle (false: it takes parts of inline_part_bytes from
    // the start, and the fed members get what waiting callers leave).
    bool leave_fed_share = true;
    // Batches of at least inline_bytes and at most this many go whole to the one member that the
    // model says finishes them first, a fed member called in the caller's own thread, as `--engine
    // gpu` calls the GPU (0: off; such batches are shared through the queue as larger ones are).
    // Through a mounted vault the feeders' hand-off and the split cost more than they gain: 8
    // streams on the H100 machine read 6.5 GB/s at 1.05 daemon CPU s/GB shared, against 8.1 GB/s
    // at 0.67 with whole requests on the GPU (`--engine gpu`); member 0 is chosen only with an
    // inline slot free, so the callers on it stay bounded as on the shared path.
    std::size_t route_whole_max_bytes = 0;
    // A fed member given no batch for this long gets the next routed one whatever the model says
    // (with learn on): its estimate follows only the work it gets, and one taken under a load that
    // has since gone would otherwise keep it idle for good.
    std::chrono::milliseconds probe_after{100};
    // Where there are as many callers as inline slots or more (two at least), a caller that gets a
    // slot does its batch whole on member 0, and the fed members take only the batches of callers
    // waiting for one. Sharing a slot holder's batch there made its caller wait for a GPU's part,
    // whose round trip on a machine whose cores are all busy took 0.2 to 1 ms a MiB (a GPU alone
    // does a MiB in 30 us): 16 callers x 1 MiB on the 16-core H100 machine, auto at 0.76x of the cpu
    // engine sharing, 0.82x (seal) and 0.95x (open) whole (2026-11-26, two interleaved rounds).
    bool saturated_callers_whole = true;
    // Follow real parts (false: keep the starting estimates; tests of the model use that).
    bool learn = true;
    // What name() says: "auto" for --engine auto; "gpu" where the members are GPUs alone (the cpu
    // engine only their fallback), as `--engine gpu` over several GPUs builds it.
    std::string name = "auto";
    // Where a retired member is reported, once. Empty: crypto/diagnostics.h (the daemon's log where
    // there is one, else stderr).
    std::function<void(const std::string&)> log;
  };

  HybridEngine(std::vector<Member> members, Options options);
  HybridEngine(std::vector<Member> members) : HybridEngine(std::move(members), Options{}) {}
  ~HybridEngine() override;

  std::string name() const override { return options_.name; }
  void seal(std::span<ChunkOp> ops) override { run(ops, true); }
  void open(std::span<ChunkOp> ops) override { run(ops, false); }
  // A batch that would run whole on member 0 (small, or a lone caller's up to lone_inline_bytes)
  // is sealed in parts there, so the caller writes the first parts while later ones are sealed;
  // a shared batch is sealed whole first.
  void seal_in_parts(std::span<ChunkOp> ops, std::span<const std::size_t> ends, const PartWriter& write) override;
  HostBuffer allocate_io_buffer(std::size_t bytes) override;

  // Bytes per member that a batch of `bytes` would get now by the model alone (the water-filled
  // split where all parts end together), retired members at zero. Feeders take their member's share
  // of what is left of a batch; for tests and the log.
  std::vector<std::size_t> plan(std::size_t bytes) const;

  struct MemberStats {
    std::string label;
    EngineCost cost;          // the current estimate
    std::size_t bytes = 0;    // processed so far in shared batches (small inline ones are not counted)
    std::size_t parts = 0;
    bool retired = false;
  };
  std::vector<MemberStats> stats() const;
  // One line: each member's current estimate and share of the bytes so far.
  std::string describe() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct State {
    Member m;
    std::size_t backlog = 0;     // bytes of parts at work there now
    std::size_t bytes = 0, parts = 0;
    std::size_t idle = 0;        // its feeders waiting for work
    bool retired = false;
    std::chrono::steady_clock::time_point last_work;  // when it was last given a part or batch
  };
  // One caller's batch while it is shared. Lives on the caller's stack; guarded by mu_.
  struct Job {
    std::span<ChunkOp> ops;
    bool seal = true;
    std::size_t next = 0;          // first op nobody has taken yet
    std::size_t bytes_left = 0;    // bytes of the ops from next on
    std::size_t in_flight = 0;     // feeder parts taken and not finished
    bool caller_working = false;   // its caller holds an inline slot
    std::exception_ptr error;
    std::condition_variable cv;    // its caller waits here
  };
  // A run of one job's ops taken by a feeder.
  struct Taken {
    Job* job;
    std::size_t first, count, bytes;
  };

  // Counts a caller inside the engine from construction to destruction; `alone` when it found
  // no other.
  struct Caller {
    std::atomic<std::size_t>& n;
    bool alone;
    explicit Caller(std::atomic<std::size_t>& c) : n(c), alone(c.fetch_add(1, std::memory_order_acq_rel) == 0) {}
    ~Caller() { n.fetch_sub(1, std::memory_order_acq_rel); }
    Caller(const Caller&) = delete;
    Caller& operator=(const Caller&) = delete;
  };
  // Whether a batch of `total` bytes runs whole on member 0 without touching the shared queue.
  bool runs_inline(std::size_t total) const { return total < options_.inline_bytes || members_.size() == 1; }

  void run(std::span<ChunkOp> ops, bool seal);
  void feeder(std::size_t member);
  // How many bytes member m should take from job j now (0: none), lock held.
  std::size_t want_locked(std::size_t m, const Job& j) const;
  // Takes ops from job j for member m up to `bytes` (at least one op), lock held.
  Taken take_locked(Job& j, std::size_t bytes);
  bool work_for_locked(std::size_t m) const;
  bool any_fed_member_locked() const;
  // Shares of `bytes` per member under the current estimates and backlogs, over the members not
  // retired (member 0 only when include_first). Lock held.
  void shares_locked(double bytes, bool include_first, std::vector<double>& share) const;
  // Wakes a feeder of each member that wants a part of `job` (nullptr: of any queued job). Lock held.
  void notify_feeders_locked(const Job* job);
  // Counts a finished part of `bytes` (which found `backlog` at work there); `took` is its rate
  // sample when sampled. Lock held.
  void account_locked(std::size_t m, std::size_t bytes, std::size_t backlog, bool sampled, double took);
  // What one call of a member's engine came to: its time (when timed), the EngineFailure of a fed
  // member (member 0 has then redone the ops), anything else thrown, and whether the member
  // reports degraded() after it.
  struct CallOutcome {
    double took = 0;
    std::string failure;
    std::exception_ptr error;
    bool lost = false;
  };
  // Runs ops on member m's engine, without the lock.
  CallOutcome call_member(std::size_t m, std::span<ChunkOp> ops, bool seal, bool timed);
  // The member that would finish a whole batch of `bytes` first by the model, among those that may
  // take one now (member 0 only with a free inline slot), or an idle fed member due for a probe
  // (Options::probe_after). Lock held, with a fed member not retired (so there is always one).
  std::size_t route_whole_locked(std::size_t bytes) const;
  // Runs a whole batch on member m in this thread (taking and giving back an inline slot for member
  // 0), learning from it and retiring a fed member that fails (member 0 then redoes the batch).
  // Called with the lock held; returns with it released.
  void run_whole(std::size_t m, std::span<ChunkOp> ops, bool seal, std::size_t total, std::unique_lock<std::mutex>& lock);
  void report_retired(const std::string& label, const std::string& failure) const;
  // Gives an inline slot back and wakes the oldest caller waiting for one that still has work. Lock held.
  void release_slot_locked();
  // Retires member m (lock held); returns whether this call did it (then the caller logs).
  bool retire_locked(std::size_t m);
  void report(const std::string& line) const;

  Options options_;
  std::size_t inline_slots_ = 1;
  mutable std::mutex mu_;
  std::vector<State> members_;
  std::deque<Job*> queue_;             // jobs with ops not yet taken, oldest first
  std::deque<Job*> slot_waiters_;      // callers waiting for an inline slot, oldest first
  std::size_t free_slots_ = 0;
  std::atomic<std::size_t> callers_{0};  // in run() past the small-batch shortcut
  std::unique_ptr<std::condition_variable[]> member_cv_;  // each member's feeders wait here for work
  bool stop_ = false;
  std::vector<std::thread> feeders_;
};

}  // namespace gcfs
