#include "crypto/hybrid_engine.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <numeric>
#include <stdexcept>

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
constexpr double kMinSecondsPerByte = 1e-13;  // 10 TB/s: a floor that keeps the model finite

}  // namespace

HybridEngine::HybridEngine(std::vector<Member> members, Options options) : options_(options) {
  if (members.empty()) throw std::invalid_argument("hybrid engine: no member engines");
  if (options_.buffer_member >= members.size()) throw std::invalid_argument("hybrid engine: no such buffer member");
  for (auto& m : members) {
    if (!m.engine) throw std::invalid_argument("hybrid engine: member without an engine");
    m.cost.seconds_per_byte = std::max(m.cost.seconds_per_byte, kMinSecondsPerByte);
    m.cost.overhead_s = std::max(m.cost.overhead_s, 0.0);
    State s;
    s.m = std::move(m);
    members_.push_back(std::move(s));
  }
  // The caller runs one part itself; helpers run the others. Several per extra member, since many
  // callers may be splitting at once; a helper waiting on a GPU sleeps.
  if (members_.size() > 1) helpers_ = std::make_unique<ThreadPool>(4 * (members_.size() - 1));
}

HybridEngine::~HybridEngine() = default;

HostBuffer HybridEngine::allocate_io_buffer(std::size_t bytes) {
  return members_[options_.buffer_member].m.engine->allocate_io_buffer(bytes);
}

std::size_t HybridEngine::first_to_finish_locked(double bytes) const {
  std::size_t best = 0;
  double best_end = 0;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const EngineCost& c = members_[i].m.cost;
    const double end = c.overhead_s + (static_cast<double>(members_[i].backlog) + bytes) * c.seconds_per_byte;
    if (i == 0 || end < best_end) best = i, best_end = end;
  }
  return best;
}

std::vector<double> HybridEngine::shares_locked(double bytes) const {
  const std::size_t n = members_.size();
  std::vector<double> start(n), cost(n), share(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    cost[i] = members_[i].m.cost.seconds_per_byte;
    start[i] = members_[i].m.cost.overhead_s + static_cast<double>(members_[i].backlog) * cost[i];
  }
  // A batch too small to cut goes whole to the member that would finish it first.
  if (n == 1 || bytes < 2.0 * static_cast<double>(options_.min_part_bytes)) {
    share[first_to_finish_locked(bytes)] = bytes;
    return share;
  }

  // Water filling: the members in order of when they could start on it; the finish time T is
  // where the shares (T - start) / cost of the members that can start before T add up to the batch.
  // A member whose share comes out under the minimum part is left out and the rest refilled.
  std::vector<bool> allowed(n, true);
  for (;;) {
    std::vector<std::size_t> order;
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
    if (smallest == n || nonzero <= 1) return share;
    allowed[smallest] = false;
  }
}

std::vector<std::size_t> HybridEngine::plan(std::size_t bytes) const {
  std::lock_guard lock(mu_);
  const auto shares = shares_locked(static_cast<double>(bytes));
  std::vector<std::size_t> out;
  for (double s : shares) out.push_back(static_cast<std::size_t>(s + 0.5));
  return out;
}

void HybridEngine::run(std::span<ChunkOp> ops, bool seal) {
  if (ops.empty()) return;
  std::size_t total = 0;
  for (const auto& op : ops) total += op.len;
  // Only a part that is a rate sample is timed: the clock is a visible share of a 4 KiB op's cost.
  auto run_part = [&](Part& p) {
    ChunkEngine& e = *members_[p.member].m.engine;
    const auto t0 = p.sample ? Clock::now() : Clock::time_point{};
    auto took = [&] { return p.sample ? std::chrono::duration<double>(Clock::now() - t0).count() : 0.0; };
    try {
      seal ? e.seal(p.ops) : e.open(p.ops);
    } catch (...) {
      finish_part(p, took());
      throw;
    }
    finish_part(p, took());
  };

  // Most batches of a mounted vault are too small to cut: they go whole to one member, with no
  // allocation on the way (a 4 KiB read costs the cpu engine about 3 us; this must stay a sliver).
  if (members_.size() == 1 || total < 2 * options_.min_part_bytes) {
    Part p{0, ops, total};
    {
      std::lock_guard lock(mu_);
      p.member = first_to_finish_locked(static_cast<double>(total));
      reserve_locked(p);
    }
    return run_part(p);
  }

  // Cut the ops into contiguous parts: op j goes to the member whose cumulative share holds the
  // middle of op j, so each part's bytes are its share rounded to whole chunks.
  std::vector<Part> parts;
  {
    std::lock_guard lock(mu_);
    const auto shares = shares_locked(static_cast<double>(total));
    std::size_t member = 0, first = 0, offset = 0;
    double bound = shares[0];
    auto close = [&](std::size_t end) {
      if (end == first) return;
      std::size_t bytes = 0;
      for (std::size_t j = first; j < end; ++j) bytes += ops[j].len;
      parts.push_back({member, ops.subspan(first, end - first), bytes});
      first = end;
    };
    for (std::size_t j = 0; j < ops.size(); ++j) {
      const double middle = static_cast<double>(offset) + static_cast<double>(ops[j].len) / 2;
      while (middle >= bound && member + 1 < shares.size()) {
        close(j);
        ++member;
        bound += shares[member];
      }
      offset += ops[j].len;
    }
    close(ops.size());
    for (auto& p : parts) reserve_locked(p);
  }
  if (parts.size() == 1) return run_part(parts[0]);
  helpers_->parallel_for(parts.size(), [&](std::size_t i) { run_part(parts[i]); });
}

void HybridEngine::reserve_locked(Part& p) {
  State& s = members_[p.member];
  p.backlog = s.backlog;
  p.sample = options_.learn && p.backlog + p.bytes >= kRateSampleMinBytes;
  s.backlog += p.bytes;
}

void HybridEngine::finish_part(const Part& p, double took) {
  std::lock_guard lock(mu_);
  State& s = members_[p.member];
  s.backlog -= p.bytes;
  s.bytes += p.bytes;
  ++s.parts;
  EngineCost& c = s.m.cost;
  const std::size_t load = p.backlog + p.bytes;
  if (p.sample) {
    // At least a fifth of the time is the rate's: a calibrated overhead larger than this part took
    // must not make the member look infinitely fast.
    const double work = std::max(took - c.overhead_s, 0.2 * took);
    const double sample = std::max(work / static_cast<double>(load), kMinSecondsPerByte);
    c.seconds_per_byte += kRateWeight * (sample - c.seconds_per_byte);
  }
}

std::vector<HybridEngine::MemberStats> HybridEngine::stats() const {
  std::lock_guard lock(mu_);
  std::vector<MemberStats> out;
  for (const auto& s : members_) out.push_back({s.m.label, s.m.cost, s.bytes, s.parts});
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
  }
  return out;
}

}  // namespace gcfs
