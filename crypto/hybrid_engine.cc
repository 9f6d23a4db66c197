#include "crypto/hybrid_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "crypto/diagnostics.h"

namespace gcfs {
namespace {

// Each finished part is one sample of the member's rate: it found `backlog` bytes at work there and
// took `took` for its own `bytes`, so seconds_per_byte ~ (took - overhead) / (backlog + bytes). Parts
// smaller than this (backlog included) say more about the overhead than about the rate and are
// not used; the overhead itself stays as calibrated (measured on a lone small request, where it
// is what the caller waits for).
constexpr std::size_t kRateSampleMinBytes = 256u << 10;
// New evidence weighs this much against the running estimate: a few parts move it, one outlier
// does not.
constexpr double kRateWeight = 0.2;
// A sample counts for at most this factor away from the estimate (see account_locked).
constexpr double kMaxRateStep = 8.0;
constexpr double kMinSecondsPerByte = 1e-13;  // 10 TB/s: a floor that keeps the model finite

}  // namespace

HybridEngine::HybridEngine(std::vector<Member> members, Options options) : options_(std::move(options)) {
  if (members.empty()) throw std::invalid_argument("hybrid engine: no member engines");
  if (options_.buffer_member >= members.size()) throw std::invalid_argument("hybrid engine: no such buffer member");
  for (auto& m : members) {
    if (!m.engine) throw std::invalid_argument("hybrid engine: member without an engine");
    m.cost.seconds_per_byte = std::max(m.cost.seconds_per_byte, kMinSecondsPerByte);
    m.cost.overhead_s = std::max(m.cost.overhead_s, 0.0);
    State s;
    s.m = std::move(m);
    s.last_work = Clock::now();
    members_.push_back(std::move(s));
  }
  options_.min_part_bytes = std::max<std::size_t>(options_.min_part_bytes, 1);
  options_.max_part_bytes = std::max(options_.max_part_bytes, options_.min_part_bytes);
  options_.inline_part_bytes = std::max<std::size_t>(options_.inline_part_bytes, 1);
  const std::size_t fed = members_.size() - 1;
  if (options_.inline_slots < 0) {
    const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    inline_slots_ = cores > fed + 1 ? cores - fed : 1;
  } else {
    inline_slots_ = static_cast<std::size_t>(options_.inline_slots);
  }
  free_slots_ = inline_slots_;
  member_cv_ = std::make_unique<std::condition_variable[]>(members_.size());
  const int per_member = std::max(1, options_.feeders);
  for (std::size_t m = 1; m < members_.size(); ++m)
    for (int f = 0; f < per_member; ++f) feeders_.emplace_back([this, m] { feeder(m); });
}

HybridEngine::~HybridEngine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  for (std::size_t m = 0; m < members_.size(); ++m) member_cv_[m].notify_all();
  for (auto& t : feeders_) t.join();
}

HostBuffer HybridEngine::allocate_io_buffer(std::size_t bytes) {
  return members_[options_.buffer_member].m.engine->allocate_io_buffer(bytes);
}

void HybridEngine::shares_locked(double bytes, bool include_first, std::vector<double>& share) const {
  // Scratch reused per thread: this runs under the lock for every batch a feeder looks at.
  thread_local std::vector<double> start, cost;
  thread_local std::vector<char> allowed;
  thread_local std::vector<std::size_t> order;
  const std::size_t n = members_.size();
  start.resize(n), cost.resize(n), allowed.resize(n);
  share.assign(n, 0.0);
  std::size_t candidates = 0;
  for (std::size_t i = 0; i < n; ++i) {
    cost[i] = members_[i].m.cost.seconds_per_byte;
    start[i] = members_[i].m.cost.overhead_s + static_cast<double>(members_[i].backlog) * cost[i];
    allowed[i] = !members_[i].retired && (i > 0 || include_first);
    candidates += allowed[i] ? 1 : 0;
  }
  if (candidates == 0) return;
  // A batch too small to cut goes whole to the member that would finish it first.
  if (candidates == 1 || bytes < 2.0 * static_cast<double>(options_.min_part_bytes)) {
    std::size_t best = n;
    double best_end = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!allowed[i]) continue;
      const double end = start[i] + bytes * cost[i];
      if (best == n || end < best_end) best = i, best_end = end;
    }
    share[best] = bytes;
    return;
  }

  // Water filling: the members in order of when they could start on it; the finish time T is
  // where the shares (T - start) / cost of the members that can start before T add up to the batch.
  // A member whose share comes out under the minimum part is left out and the rest refilled.
  for (;;) {
    order.clear();
    for (std::size_t i = 0; i < n; ++i)
      if (allowed[i]) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return start[a] < start[b]; });
    double inv = 0, weighted = 0, finish = 0;
    std::size_t used = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
      inv += 1.0 / cost[order[k]];
      weighted += start[order[k]] / cost[order[k]];
      finish = (bytes + weighted) / inv;
      used = k + 1;
      if (k + 1 == order.size() || finish <= start[order[k + 1]]) break;
    }
    std::fill(share.begin(), share.end(), 0.0);
    for (std::size_t k = 0; k < used; ++k)
      share[order[k]] = std::max(0.0, (finish - start[order[k]]) / cost[order[k]]);
    std::size_t smallest = n, nonzero = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (share[i] <= 0) continue;
      ++nonzero;
      if (share[i] < static_cast<double>(options_.min_part_bytes) && (smallest == n || share[i] < share[smallest]))
        smallest = i;
    }
    if (smallest == n || nonzero <= 1) return;
    allowed[smallest] = 0;
  }
}

std::vector<std::size_t> HybridEngine::plan(std::size_t bytes) const {
  std::lock_guard lock(mu_);
  std::vector<double> shares;
  shares_locked(static_cast<double>(bytes), true, shares);
  std::vector<std::size_t> out;
  for (double s : shares) out.push_back(static_cast<std::size_t>(s + 0.5));
  return out;
}

bool HybridEngine::any_fed_member_locked() const {
  for (std::size_t m = 1; m < members_.size(); ++m)
    if (!members_[m].retired) return true;
  return false;
}

std::size_t HybridEngine::want_locked(std::size_t m, const Job& j) const {
  if (members_[m].retired || j.bytes_left == 0) return 0;
  // Member 0 is at work on this batch, or will be as soon as its caller runs (a slot is free):
  // the member takes its share by the model. Otherwise the caller waits for a slot, and the fed
  // members share what is left between themselves.
  const bool first_helps = j.caller_working || free_slots_ > 0;
  thread_local std::vector<double> share;
  shares_locked(static_cast<double>(j.bytes_left), first_helps, share);
  return static_cast<std::size_t>(share[m] + 0.5);
}

bool HybridEngine::work_for_locked(std::size_t m) const {
  for (const Job* j : queue_)
    if (want_locked(m, *j) > 0) return true;
  return false;
}

HybridEngine::Taken HybridEngine::take_locked(Job& j, std::size_t bytes) {
  Taken t{&j, j.next, 0, 0};
  while (j.next < j.ops.size() && (t.count == 0 || t.bytes < bytes)) {
    t.bytes += j.ops[j.next].len;
    ++t.count;
    ++j.next;
  }
  // Empty ops at the end come along: with no bytes left, nobody would want them.
  while (j.next < j.ops.size() && j.ops[j.next].len == 0) ++t.count, ++j.next;
  j.bytes_left -= t.bytes;
  if (j.next == j.ops.size()) {
    auto it = std::find(queue_.begin(), queue_.end(), &j);
    if (it != queue_.end()) queue_.erase(it);
  }
  return t;
}

void HybridEngine::notify_feeders_locked(const Job* job) {
  for (std::size_t m = 1; m < members_.size(); ++m)
    if (members_[m].idle > 0 && (job ? want_locked(m, *job) > 0 : work_for_locked(m))) member_cv_[m].notify_one();
}

void HybridEngine::seal_in_parts(std::span<ChunkOp> ops, std::span<const std::size_t> ends, const PartWriter& write) {
  std::size_t total = 0;
  for (const auto& op : ops) total += op.len;
  ChunkEngine& first = *members_[0].m.engine;
  if (runs_inline(total)) return first.seal_in_parts(ops, ends, write);
  if (total <= options_.lone_inline_bytes) {
    Caller caller(callers_);
    if (caller.alone) return first.seal_in_parts(ops, ends, write);
  }
  // Shared: sealed whole (run() counts this caller again), then handed over in one call.
  ChunkEngine::seal_in_parts(ops, ends, write);
}

void HybridEngine::run(std::span<ChunkOp> ops, bool seal) {
  if (ops.empty()) return;
  ChunkEngine& first = *members_[0].m.engine;
  // Most batches of a mounted vault are small: they go to member 0 at once, touching nothing shared
  // (a 4 KiB read costs the cpu engine about 2 us; this must stay a sliver of that).
  std::size_t total = 0;
  for (const auto& op : ops) total += op.len;
  if (runs_inline(total)) return seal ? first.seal(ops) : first.open(ops);
  // Counted from here to the return: whether this caller is alone in the engine.
  Caller caller(callers_);
  if (caller.alone && total <= options_.lone_inline_bytes) return seal ? first.seal(ops) : first.open(ops);

  std::unique_lock lock(mu_);
  if (!any_fed_member_locked()) {
    // Every fed member is retired: member 0 takes it all, and its share says so.
    members_[0].bytes += total, ++members_[0].parts;
    lock.unlock();
    return seal ? first.seal(ops) : first.open(ops);
  }
  // A fed member is left (above), so the route always finds a member.
  if (total <= options_.route_whole_max_bytes) return run_whole(route_whole_locked(total), ops, seal, total, lock);
  const std::size_t callers_now = callers_.load(std::memory_order_acquire);
  if (options_.saturated_callers_whole && free_slots_ > 0 && callers_now >= inline_slots_ && callers_now > 1) {
    // As many callers as inline slots, or more (and not a lone caller): member 0's work in the
    // callers' own threads keeps every core it may use busy already, and a part of this batch
    // handed to a fed member would only add that member's round trip, long on a busy machine, to
    // this caller's wait (see Options::saturated_callers_whole). The caller does its batch whole;
    // the fed members take the batches of the callers that wait for a slot.
    return run_whole(0, ops, seal, total, lock);
  }
  Job job;
  job.ops = ops;
  job.seal = seal;
  job.bytes_left = total;
  bool holds_slot = false, took_first = false;
  if (free_slots_ > 0) --free_slots_, holds_slot = job.caller_working = true;
  queue_.push_back(&job);
  notify_feeders_locked(&job);

  auto stop_waiting_for_slot = [&] {
    auto it = std::find(slot_waiters_.begin(), slot_waiters_.end(), &job);
    if (it != slot_waiters_.end()) slot_waiters_.erase(it);
  };
  for (;;) {
    if (job.next < job.ops.size()) {
      if (!job.caller_working) {
        if (free_slots_ > 0) {
          --free_slots_, holds_slot = job.caller_working = true;
          stop_waiting_for_slot();
        } else if (!any_fed_member_locked()) {
          job.caller_working = true;  // nobody else is left to do it: no slot needed
          stop_waiting_for_slot();
        }
      }
      if (job.caller_working) {
        // The caller's first part is member 0's share by the model, so that the fed members find
        // theirs still queued when their feeders wake (taking everything at once would leave them
        // nothing whenever the caller holds a slot); after that it takes whatever nobody has taken
        // yet, a part at a time: a fed member that is slow to come loses its share to the caller
        // instead of keeping it waiting.
        std::size_t want = options_.inline_part_bytes;
        if (!took_first && options_.leave_fed_share) {
          took_first = true;
          bool idle_feeder = false;
          for (std::size_t m = 1; m < members_.size() && !idle_feeder; ++m)
            idle_feeder = members_[m].idle > 0 && want_locked(m, job) > 0;
          if (idle_feeder) {
            // A fed member is ready for its share: the caller takes member 0's (at least one
            // minimum part, so it never holds a slot idle) and leaves the rest queued for it.
            thread_local std::vector<double> share;
            shares_locked(static_cast<double>(job.bytes_left), true, share);
            want = std::min(want, std::max(static_cast<std::size_t>(share[0] + 0.5), options_.min_part_bytes));
          }
          // Otherwise every fed member is busy, and the model does not see what already waits for
          // them (queued work is nobody's backlog yet): the caller starts on its batch at once.
        }
        const Taken t = take_locked(job, want);
        State& s = members_[0];
        const std::size_t backlog = s.backlog;
        s.backlog += t.bytes;
        const bool sampled = options_.learn && backlog + t.bytes >= kRateSampleMinBytes;
        lock.unlock();
        const auto t0 = sampled ? Clock::now() : Clock::time_point{};
        std::exception_ptr error;
        try {
          auto part = ops.subspan(t.first, t.count);
          seal ? first.seal(part) : first.open(part);
        } catch (...) {
          error = std::current_exception();
        }
        const double took = sampled ? std::chrono::duration<double>(Clock::now() - t0).count() : 0.0;
        lock.lock();
        account_locked(0, t.bytes, backlog, sampled && !error, took);
        if (error && !job.error) job.error = error;
        continue;
      }
      if (std::find(slot_waiters_.begin(), slot_waiters_.end(), &job) == slot_waiters_.end())
        slot_waiters_.push_back(&job);
      job.cv.wait(lock);
      continue;
    }
    // Every op is taken: the slot goes to the oldest caller that still has work for it.
    stop_waiting_for_slot();
    if (holds_slot) {
      holds_slot = job.caller_working = false;
      release_slot_locked();
    }
    if (job.in_flight == 0) break;
    job.cv.wait(lock);
  }
  lock.unlock();
  if (job.error) std::rethrow_exception(job.error);
}

HybridEngine::CallOutcome HybridEngine::call_member(std::size_t m, std::span<ChunkOp> ops, bool seal, bool timed) {
  ChunkEngine& engine = *members_[m].m.engine;
  CallOutcome out;
  const auto t0 = timed ? Clock::now() : Clock::time_point{};
  try {
    seal ? engine.seal(ops) : engine.open(ops);
  } catch (const EngineFailure& e) {
    if (m == 0) out.error = std::current_exception();
    else out.failure = e.what();
  } catch (...) {
    out.error = std::current_exception();
  }
  if (timed) out.took = std::chrono::duration<double>(Clock::now() - t0).count();
  out.lost = m > 0 && out.failure.empty() && !out.error && engine.degraded();
  if (!out.failure.empty()) {  // the inputs are untouched: member 0 redoes the ops, here and now
    ChunkEngine& first = *members_[0].m.engine;
    try {
      seal ? first.seal(ops) : first.open(ops);
    } catch (...) {
      out.error = std::current_exception();
    }
  }
  return out;
}

std::size_t HybridEngine::route_whole_locked(std::size_t bytes) const {
  if (options_.learn) {
    const auto now = Clock::now();
    for (std::size_t i = 1; i < members_.size(); ++i) {
      const State& s = members_[i];
      if (!s.retired && s.backlog == 0 && now - s.last_work >= options_.probe_after) return i;
    }
  }
  const double b = static_cast<double>(bytes);
  std::size_t best = members_.size();
  double best_end = 0;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const State& s = members_[i];
    if (s.retired || (i == 0 && free_slots_ == 0)) continue;
    const double end = s.m.cost.overhead_s + (static_cast<double>(s.backlog) + b) * s.m.cost.seconds_per_byte;
    if (best == members_.size() || end < best_end) best = i, best_end = end;
  }
  return best;
}

void HybridEngine::run_whole(std::size_t m, std::span<ChunkOp> ops, bool seal, std::size_t total,
                             std::unique_lock<std::mutex>& lock) {
  State& s = members_[m];
  if (m == 0) --free_slots_;
  s.last_work = Clock::now();
  const std::size_t backlog = s.backlog;
  s.backlog += total;
  const bool sampled = options_.learn && backlog + total >= kRateSampleMinBytes;
  lock.unlock();
  auto [took, failure, error, lost] = call_member(m, ops, seal, sampled);
  lock.lock();
  account_locked(m, total, backlog, sampled && failure.empty() && !lost && !error, took);
  if (!failure.empty()) {  // member 0 did these bytes
    s.bytes -= total, --s.parts;
    members_[0].bytes += total, ++members_[0].parts;
  }
  if (m == 0) release_slot_locked();
  const bool newly_retired = (!failure.empty() || lost) && retire_locked(m);
  const std::string label = s.m.label;
  lock.unlock();
  if (newly_retired) report_retired(label, failure);
  if (error) std::rethrow_exception(error);
}

void HybridEngine::feeder(std::size_t m) {
  if (members_[m].m.feeder_setup) members_[m].m.feeder_setup();
  std::vector<Taken> taken;
  std::vector<ChunkOp> gathered;
  std::unique_lock lock(mu_);
  for (;;) {
    ++members_[m].idle;
    member_cv_[m].wait(lock, [&] { return stop_ || members_[m].retired || work_for_locked(m); });
    --members_[m].idle;
    if (stop_ || members_[m].retired) return;

    // Take this member's share of the queued batches, oldest first, of one direction, up to what
    // one call should carry, and no more than this feeder's share of it while the member's other
    // feeders are idle: several calls in flight keep a GPU busy while the callers of a finished call
    // post their next batches (one call carrying every queued batch would leave it idle then).
    std::size_t wanted = 0;
    for (const Job* j : queue_) wanted += want_locked(m, *j);
    const std::size_t limit = std::min(
        options_.max_part_bytes, std::max(options_.min_part_bytes, (wanted + members_[m].idle) / (members_[m].idle + 1)));
    taken.clear();
    std::size_t bytes = 0;
    bool seal = true;
    for (std::size_t i = 0; i < queue_.size() && bytes < limit;) {
      Job& j = *queue_[i];
      const std::size_t want = std::min(want_locked(m, j), limit - bytes);
      if (want == 0 || (!taken.empty() && j.seal != seal)) {
        ++i;
        continue;
      }
      seal = j.seal;
      taken.push_back(take_locked(j, want));
      ++j.in_flight;
      bytes += taken.back().bytes;
      if (j.next < j.ops.size()) ++i;  // still queued (a batch fully taken has left the queue)
    }
    if (taken.empty()) continue;
    State& s = members_[m];
    s.last_work = Clock::now();
    const std::size_t backlog = s.backlog;
    s.backlog += bytes;
    if (s.idle > 0 && work_for_locked(m)) member_cv_[m].notify_one();  // more for another feeder
    const bool sampled = options_.learn && backlog + bytes >= kRateSampleMinBytes;
    lock.unlock();

    // One call over every part taken: contiguous ops of one batch as they are, parts of several
    // batches copied into one array (ops are small) and their tags and verdicts copied back.
    std::span<ChunkOp> ops;
    if (taken.size() == 1) {
      ops = taken[0].job->ops.subspan(taken[0].first, taken[0].count);
    } else {
      gathered.clear();
      for (const Taken& t : taken)
        gathered.insert(gathered.end(), t.job->ops.begin() + static_cast<std::ptrdiff_t>(t.first),
                        t.job->ops.begin() + static_cast<std::ptrdiff_t>(t.first + t.count));
      ops = gathered;
    }
    auto [took, failure, error, lost] = call_member(m, ops, seal, sampled);
    if (taken.size() > 1) {
      std::size_t k = 0;
      for (const Taken& t : taken)
        for (std::size_t i = 0; i < t.count; ++i, ++k) {
          ChunkOp& op = t.job->ops[t.first + i];
          op.tag = gathered[k].tag;
          op.ok = gathered[k].ok;
        }
    }

    lock.lock();
    account_locked(m, bytes, backlog, sampled && failure.empty() && !lost && !error, took);
    if (!failure.empty()) {  // member 0 did these bytes
      s.bytes -= bytes, --s.parts;
      members_[0].bytes += bytes, ++members_[0].parts;
    }
    const bool newly_retired = (!failure.empty() || lost) && retire_locked(m);
    for (const Taken& t : taken) {
      Job& j = *t.job;
      if (error && !j.error) j.error = error;
      if (--j.in_flight == 0 && j.next == j.ops.size()) j.cv.notify_one();
    }
    if (newly_retired) {
      const std::string label = s.m.label;
      lock.unlock();
      report_retired(label, failure);
      lock.lock();
    }
  }
}

void HybridEngine::release_slot_locked() {
  ++free_slots_;
  // The slot goes to the oldest caller that still has work for it.
  while (!slot_waiters_.empty()) {
    Job* w = slot_waiters_.front();
    slot_waiters_.pop_front();
    if (w->next < w->ops.size()) {
      w->cv.notify_one();
      break;
    }
  }
}

bool HybridEngine::retire_locked(std::size_t m) {
  if (members_[m].retired) return false;
  members_[m].retired = true;
  member_cv_[m].notify_all();  // its other feeders leave
  // Callers waiting for a slot may now have nobody but themselves; batches may now be wanted by
  // the other members.
  if (!any_fed_member_locked())
    for (Job* w : slot_waiters_) w->cv.notify_one();
  notify_feeders_locked(nullptr);
  return true;
}

void HybridEngine::account_locked(std::size_t m, std::size_t bytes, std::size_t backlog, bool sampled, double took) {
  State& s = members_[m];
  s.backlog -= bytes;
  s.bytes += bytes;
  ++s.parts;
  if (!sampled) return;
  EngineCost& c = s.m.cost;
  // At least a fifth of the time is the rate's: a calibrated overhead larger than this part took
  // must not make the member look infinitely fast.
  const double work = std::max(took - c.overhead_s, 0.2 * took);
  const double sample = std::max(work / static_cast<double>(backlog + bytes), kMinSecondsPerByte);
  // Averaged as logarithms, each sample held to within kMaxRateStep of the estimate: a part's time
  // includes whatever its caller waited for besides the member (a core, with as many callers as
  // cores), and such a sample can be a hundred times the member's real time per byte. Averaged as
  // they were (seconds per byte), one such part took a GPU's estimate from 35 GB/s to under 1, and
  // with little work routed to it the member could not learn it back (two H100s and one, 2026-11-26:
  // learned rates of 0.6 to 5 GB/s for members doing 30 and more).
  const double ratio = std::clamp(sample / c.seconds_per_byte, 1.0 / kMaxRateStep, kMaxRateStep);
  c.seconds_per_byte = std::max(c.seconds_per_byte * std::pow(ratio, kRateWeight), kMinSecondsPerByte);
}

void HybridEngine::report_retired(const std::string& label, const std::string& failure) const {
  report(failure.empty() ? "hybrid engine: " + label +
                               " lost its device and runs on its fallback; it gets no more work, the other members "
                               "take its share"
                         : "hybrid engine: " + label + " failed (" + failure + "); its part was redone on " +
                               members_[0].m.label + ", and it gets no more work: the other members take its share");
}

void HybridEngine::report(const std::string& line) const {
  if (options_.log) options_.log(line);
  else diag::error(line);
}

std::vector<HybridEngine::MemberStats> HybridEngine::stats() const {
  std::lock_guard lock(mu_);
  std::vector<MemberStats> out;
  for (const auto& s : members_) out.push_back({s.m.label, s.m.cost, s.bytes, s.parts, s.retired});
  return out;
}

std::string HybridEngine::describe() const {
  const auto st = stats();
  std::size_t total = 0;
  for (const auto& s : st) total += s.bytes;
  std::string out;
  for (const auto& s : st) {
    char line[160];
    std::snprintf(line, sizeof line, "%s%s %.1f us + %.1f GB/s", out.empty() ? "" : ", ", s.label.c_str(),
                  s.cost.overhead_s * 1e6, 1e-9 / s.cost.seconds_per_byte);
    out += line;
    if (total) {
      std::snprintf(line, sizeof line, " (%.0f%% of the bytes)", 100.0 * static_cast<double>(s.bytes) / static_cast<double>(total));
      out += line;
    }
    if (s.retired) out += " (retired)";
  }
  return out;
}

}  // namespace gcfs
