// Measurement core for chunk engines: what `gpucryptfs bench` sweeps and what the GPU device
// script prints. Works on any ChunkEngine (cpu, gpu, auto) through the public interface alone, so
// the numbers include everything a mounted filesystem would pay: packing, copies, queueing.
//
// Numbers are measured, never derived: throughput is bytes over wall time for a fixed amount of
// work, CPU cost is getrusage(RUSAGE_SELF) user+system seconds over the same interval (so it counts
// the engine's worker threads and the callers alike), latency is the median of single requests.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"

namespace gcfs {

enum class BenchOp { Seal, Open };
const char* to_string(BenchOp op);

// One point of a throughput sweep: `concurrency` threads each issue requests of `request_bytes`
// (cut into chunks of `chunk_size`, the last one partial when it does not divide) until
// `min_seconds` have passed and at least `min_requests` requests were made in total.
struct ThroughputConfig {
  BenchOp op = BenchOp::Seal;
  std::size_t chunk_size = 64 * 1024;
  std::size_t request_bytes = 1 << 20;
  int concurrency = 1;
  double min_seconds = 0.5;
  std::size_t min_requests = 8;
  std::size_t distinct_keys = 4;  // chunks of one request share a key, as one file's chunks do
  std::size_t aad_bytes = 24;     // file ID and chunk number, as the vault format uses
  // Request buffers from engine.allocate_io_buffer (as the filesystem's scratch buffers are:
  // pinned and zero-copy with the gpu engine); false: plain heap memory (staged copies).
  bool engine_buffers = true;
};

struct ThroughputResult {
  ThroughputConfig config;
  std::string engine;             // ChunkEngine::name()
  std::size_t bytes = 0;          // plaintext bytes processed
  std::size_t requests = 0;
  double seconds = 0;             // wall time
  double gb_per_s = 0;            // bytes / seconds / 1e9
  double cpu_seconds = 0;         // process user+system time over the run
  double cpu_seconds_per_gb = 0;  // cpu_seconds / (bytes / 1e9)
};

ThroughputResult measure_throughput(ChunkEngine& engine, const ThroughputConfig& config);

// Round-trip time of one request on an otherwise idle engine (one caller, one request at a time).
struct LatencyConfig {
  BenchOp op = BenchOp::Seal;
  std::size_t chunk_size = 64 * 1024;
  std::size_t request_bytes = 128 * 1024;
  std::size_t repeats = 200;      // after `warmup` untimed requests
  std::size_t warmup = 20;
  bool engine_buffers = true;     // as in ThroughputConfig
};

struct LatencyResult {
  LatencyConfig config;
  std::string engine;
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
  double min_us = 0;
};

LatencyResult measure_latency(ChunkEngine& engine, const LatencyConfig& config);

// Checks that `engine` seals like the cpu engine and opens what it sealed, on a small random batch:
// a benchmark of a wrong engine is worthless. Throws std::runtime_error naming the first mismatch.
void verify_engine_against_cpu(ChunkEngine& engine, std::size_t chunk_size);

}  // namespace gcfs
