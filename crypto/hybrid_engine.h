// The engine behind `--engine auto` on a machine with GPUs: several engines at once (the cpu engine
// and one gpu engine per GPU), each batch cut between them by their measured rates so that every
// part is predicted to finish at the same moment. Written against ChunkEngine alone: it neither
// knows nor cares which member is a GPU, so it is tested with cpu engines and slowed-down fakes.
//
// The model, per member: a part of x bytes, given to a member that already has b bytes at work,
// finishes after overhead + (b + x) * seconds_per_byte. The overhead is what a lone small batch
// costs there (a GPU's launch and PCIe round trip, about 30 us on the H100; next to nothing on the
// cpu engine); seconds_per_byte is the member's throughput under the load it actually gets. So a
// small batch on an idle machine stays on the cpu engine (the GPU's overhead alone is longer than
// the whole batch there), a large one is shared, and under a load that keeps the cpu engine busy
// even small batches go where the queue is shortest. Both figures start from the factory's short
// calibration; seconds_per_byte then follows real batches (each part large enough is a sample: the
// time it took, less the overhead, over its bytes and the bytes it found at work there), so the
// split follows the rates the members really reach under the load at hand.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/thread_pool.h"

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
  };
  struct Options {
    // No member gets a part smaller than this (the batch stays whole when it is smaller): a part
    // costs a hand-off to a helper thread and, on a GPU, a launch.
    std::size_t min_part_bytes = 64u << 10;
    // The member whose allocate_io_buffer the callers get (a GPU's page-locked memory serves the
    // cpu engine as well as any other memory, and lets the GPU skip its staging copies).
    std::size_t buffer_member = 0;
    // Follow real batches (false: keep the starting estimates; tests of the split use that).
    bool learn = true;
  };

  HybridEngine(std::vector<Member> members, Options options);
  HybridEngine(std::vector<Member> members) : HybridEngine(std::move(members), Options{}) {}
  ~HybridEngine() override;

  std::string name() const override { return "auto"; }
  void seal(std::span<ChunkOp> ops) override { run(ops, true); }
  void open(std::span<ChunkOp> ops) override { run(ops, false); }
  HostBuffer allocate_io_buffer(std::size_t bytes) override;

  // Bytes per member that a batch of `bytes` would get now (the model alone; ops then round it to
  // whole chunks). For tests and the log.
  std::vector<std::size_t> plan(std::size_t bytes) const;

  struct MemberStats {
    std::string label;
    EngineCost cost;          // the current estimate
    std::size_t bytes = 0;    // processed so far
    std::size_t parts = 0;
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
  };
  struct Part {
    std::size_t member;
    std::span<ChunkOp> ops;
    std::size_t bytes;
    std::size_t backlog = 0;     // bytes already at work on the member when this part was given to it
    bool sample = false;         // timed, as a sample of the member's rate
  };

  void run(std::span<ChunkOp> ops, bool seal);
  // Shares of `bytes` per member under the current estimates and backlogs (lock held).
  std::vector<double> shares_locked(double bytes) const;
  // The member that would finish a whole batch of `bytes` first (lock held).
  std::size_t first_to_finish_locked(double bytes) const;
  // Counts a part as at work on its member (lock held).
  void reserve_locked(Part& p);
  // Counts the part as done; `took` (seconds) is its rate sample when p.sample.
  void finish_part(const Part& p, double took);

  Options options_;
  mutable std::mutex mu_;
  std::vector<State> members_;
  std::unique_ptr<ThreadPool> helpers_;  // runs the parts beyond the caller's own
};

}  // namespace gcfs
