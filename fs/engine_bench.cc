#include "fs/engine_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "crypto/cpu_engine.h"
#include "crypto/random.h"

namespace gcfs {
namespace {

using Clock = std::chrono::steady_clock;

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// The buffers and ops of one request, built once and reused so that the timed loop measures the
// engine, not allocation. For Open, the input is sealed once up front (by the engine under test).
class RequestSet {
 public:
  // engine_buffers: in and out come from engine.allocate_io_buffer, as the filesystem's scratch
  // buffers do (pinned, zero-copy with the gpu engine); otherwise plain heap memory (staged).
  RequestSet(ChunkEngine& engine, bool engine_buffers, std::size_t request_bytes, std::size_t chunk_size,
             std::size_t aad_bytes, const std::vector<ChunkKey>& keys, std::size_t key_index)
      : in_(engine_buffers ? engine.allocate_io_buffer(request_bytes) : HostBuffer::plain(request_bytes)),
        out_(engine_buffers ? engine.allocate_io_buffer(request_bytes) : HostBuffer::plain(request_bytes)),
        aad_(std::min(aad_bytes, kMaxChunkAadBytes)) {
    if (chunk_size == 0) throw std::invalid_argument("benchmark: chunk size must be positive");
    random_bytes(std::span<std::uint8_t>(in_.data(), in_.size()));
    random_bytes(aad_);
    const ChunkKey* key = &keys[key_index % keys.size()];
    for (std::size_t off = 0; off < request_bytes || (request_bytes == 0 && ops_.empty());
         off += chunk_size) {
      ChunkOp op;
      op.key = key;
      random_bytes(op.nonce);
      op.aad = aad_.data();
      op.aad_len = aad_.size();
      op.in = in_.data() + off;
      op.out = out_.data() + off;
      op.len = std::min(chunk_size, request_bytes - off);
      ops_.push_back(op);
      if (request_bytes == 0) break;
    }
  }
  // Open needs ciphertext and tags as input: seal once, then use out as in.
  void prepare_open(ChunkEngine& engine) {
    engine.seal(ops_);
    std::swap(in_, out_);
    for (std::size_t i = 0, off = 0; i < ops_.size(); off += ops_[i].len, ++i) {
      ops_[i].in = in_.data() + off;
      ops_[i].out = out_.data() + off;
    }
  }
  void run(ChunkEngine& engine, BenchOp op) {
    if (op == BenchOp::Seal) {
      engine.seal(ops_);
    } else {
      engine.open(ops_);
      for (const auto& o : ops_)
        if (!o.ok) throw std::runtime_error("benchmark: " + engine.name() + " engine failed to open what it sealed");
    }
  }

 private:
  HostBuffer in_, out_;
  std::vector<std::uint8_t> aad_;
  std::vector<ChunkOp> ops_;
};

std::vector<ChunkKey> random_keys(std::size_t n) {
  std::vector<ChunkKey> keys(std::max<std::size_t>(n, 1));
  for (auto& k : keys) random_bytes(k.bytes);
  return keys;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

const char* to_string(BenchOp op) { return op == BenchOp::Seal ? "seal" : "open"; }

ThroughputResult measure_throughput(ChunkEngine& engine, const ThroughputConfig& c) {
  if (c.concurrency < 1) throw std::invalid_argument("benchmark: concurrency must be at least 1");
  const auto keys = random_keys(c.distinct_keys);
  std::vector<std::unique_ptr<RequestSet>> sets;
  for (int t = 0; t < c.concurrency; ++t) {
    sets.push_back(std::make_unique<RequestSet>(engine, c.engine_buffers, c.request_bytes, c.chunk_size, c.aad_bytes, keys, t));
    if (c.op == BenchOp::Open) sets.back()->prepare_open(engine);
    sets.back()->run(engine, c.op);  // warm-up: first-use costs stay out of the numbers
  }

  std::atomic<bool> stop{false};
  std::atomic<std::size_t> requests{0};
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mu;
  const double cpu0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < c.concurrency; ++t) {
    threads.emplace_back([&, t] {
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          sets[t]->run(engine, c.op);
          requests.fetch_add(1, std::memory_order_relaxed);
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(failure_mu);
        failure = e.what();
        failed = true;
        stop = true;
      }
    });
  }
  while (!stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (elapsed >= c.min_seconds && requests.load() >= c.min_requests) stop = true;
  }
  for (auto& th : threads) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = process_cpu_seconds() - cpu0;
  if (failed) throw std::runtime_error(failure);

  ThroughputResult r;
  r.config = c;
  r.engine = engine.name();
  r.requests = requests.load();
  r.bytes = r.requests * c.request_bytes;
  r.seconds = seconds;
  r.gb_per_s = seconds > 0 ? static_cast<double>(r.bytes) / seconds / 1e9 : 0;
  r.cpu_seconds = cpu;
  r.cpu_seconds_per_gb = r.bytes ? cpu / (static_cast<double>(r.bytes) / 1e9) : 0;
  return r;
}

LatencyResult measure_latency(ChunkEngine& engine, const LatencyConfig& c) {
  const auto keys = random_keys(1);
  RequestSet set(engine, c.engine_buffers, c.request_bytes, c.chunk_size, 24, keys, 0);
  if (c.op == BenchOp::Open) set.prepare_open(engine);
  for (std::size_t i = 0; i < c.warmup; ++i) set.run(engine, c.op);
  std::vector<double> us;
  us.reserve(c.repeats);
  for (std::size_t i = 0; i < c.repeats; ++i) {
    const auto t0 = Clock::now();
    set.run(engine, c.op);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  LatencyResult r;
  r.config = c;
  r.engine = engine.name();
  r.median_us = percentile(us, 0.5);
  r.p10_us = percentile(us, 0.1);
  r.p90_us = percentile(us, 0.9);
  r.min_us = percentile(us, 0.0);
  return r;
}

void verify_engine_against_cpu(ChunkEngine& engine, std::size_t chunk_size) {
  const auto keys = random_keys(3);
  const std::size_t n = 6;
  std::vector<std::uint8_t> plain(n * chunk_size), a(plain.size()), b(plain.size()), back(plain.size());
  std::vector<std::uint8_t> aad(24);
  random_bytes(plain);
  random_bytes(aad);
  std::vector<ChunkOp> ops_a(n), ops_b(n);
  for (std::size_t i = 0; i < n; ++i) {
    ChunkOp op;
    op.key = &keys[i % keys.size()];
    random_bytes(op.nonce);
    op.aad = aad.data();
    op.aad_len = (i * 7) % (aad.size() + 1);
    op.in = plain.data() + i * chunk_size;
    op.len = i + 1 == n ? chunk_size / 3 + 1 : chunk_size;  // a partial last chunk
    ops_a[i] = op;
    ops_a[i].out = a.data() + i * chunk_size;
    ops_b[i] = op;
    ops_b[i].out = b.data() + i * chunk_size;
  }
  CpuEngine reference(1);
  reference.seal(ops_a);
  engine.seal(ops_b);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::memcmp(ops_a[i].out, ops_b[i].out, ops_a[i].len) != 0 || ops_a[i].tag != ops_b[i].tag)
      throw std::runtime_error("the " + engine.name() + " engine does not seal like the cpu engine (chunk " +
                               std::to_string(i) + ")");
    ops_b[i].in = ops_b[i].out;
    ops_b[i].out = back.data() + i * chunk_size;
  }
  engine.open(ops_b);
  for (std::size_t i = 0; i < n; ++i)
    if (!ops_b[i].ok || std::memcmp(ops_b[i].out, plain.data() + i * chunk_size, ops_b[i].len) != 0)
      throw std::runtime_error("the " + engine.name() + " engine does not open what it sealed (chunk " +
                               std::to_string(i) + ")");
}

}  // namespace gcfs
