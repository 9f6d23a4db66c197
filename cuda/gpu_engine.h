// The gpu engine's public face: plain C++, no CUDA headers, so fs/ and mount/ can create and
// describe it whether or not this binary was built with nvcc.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crypto/chunk_engine.h"

namespace gcfs {

struct GpuInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  std::size_t memory_bytes = 0;
  std::string pci_bus_id;  // "0000:3B:00.0"
  int numa_node = -1;      // of its PCI slot; -1 where the host does not say
};

struct GpuOptions {
  std::vector<int> devices;                         // empty: every visible GPU
  int streams_per_gpu = 4;
  std::size_t max_batch_bytes = 32u << 20;          // one launch gathers at most this much
  // How long a batch waits for company, and only while the GPU is busy with other batches: an
  // idle GPU starts a lone request at once, so waiting never adds latency to a quiet system.
  std::chrono::microseconds gather_wait{30};
  // A request larger than this is cut into parts that run on several streams at once, so one large
  // caller still overlaps its copies to the GPU, the kernels and the copies back.
  std::size_t piece_bytes = 4u << 20;
  // "auto" (fine-grained for batches too small to fill the GPU, coarse otherwise), "coarse", "fine".
  std::string kernel = "auto";
  // How long a caller polls for its batch before sleeping until the GPU signals, while it is the
  // engine's only caller (polling answers a lone small request sooner) or its batch is small (see
  // spin_batch_bytes). Otherwise batches are gathered and leaders sleep at once.
  std::chrono::microseconds spin{100};
  // A batch this small is also polled for (up to `spin`) while the engine has no more callers
  // than twice its streams: it takes the GPU about as long as waking a thread that slept on it
  // (about 30 us on the H100 machine), so a leader that sleeps doubles its round trip. Measured
  // there with 128 KiB requests (2026-11-26): 2 callers 3.5-4.0 to 7.3-7.5 GB/s, 8 callers 8.3-9.5
  // to 11.2-12.0, at 0.25-0.35 CPU s/GB either way. With 32 callers polling leaders took cores
  // the callers needed and kept batches small (10-11 GB/s against 12.3-13.4), and batches of 1 MiB
  // and more gained nothing: there leaders sleep. 0: poll only for a lone caller.
  std::size_t spin_batch_bytes = 256u << 10;
  // Where GPU errors are reported (the batch itself is redone on the fallback engine). Empty:
  // crypto/diagnostics.h (the daemon's log where there is one, else stderr).
  std::function<void(const std::string&)> on_error;
  // Small batches (under 2 MiB) run CTR and GHASH in one cooperative launch instead of two.
  bool fused = true;
  // A fused batch whose ops all lie in memory from allocate_io_buffer (and do not overlap) is
  // direct: the kernel reads and writes that host memory itself over the bus, so the request
  // costs one small header copy and the launch, no data copies. False: such batches are copied.
  bool direct = true;
  // A key's GPU tables (round keys and GHASH tables for its powers, built on the host and copied to
  // the GPU with the batch) cost more CPU than AES-NI takes for a few hundred KiB. A batch of fewer
  // bytes than this, with a key the engine has not prepared, runs on the fallback instead, until
  // that key has come back in key_warmup_batches batches: a tree of small files read once then
  // costs each file its AES, not a table build and a GPU round trip (measured through the mount,
  // 20k files: 180 us of daemon CPU more per file on the GPU), while a file read or written many
  // times over gets its tables and the GPU. 0: every batch to the GPU (the kernels' tests).
  std::size_t cold_key_cpu_bytes = 0;
  unsigned key_warmup_batches = 4;
  // Threads that copy large batches into and out of the pinned staging buffers (0: one per core,
  // the caller among them; each engine has its own, one per GPU with several).
  int copy_threads = 0;
  // Requests of at most resident_max_request_bytes whose ops all lie in memory from
  // allocate_io_buffer (each op in place or apart from its output) go to a resident worker: a kernel that stays on each GPU
  // and polls a ring of descriptors in host memory, so such a request costs no CUDA call, no launch
  // and no event, only a descriptor per chunk and a wake-up. It holds resident_ctas SMs of each GPU
  // while it runs (0: half of them), starts on the first request and stops after
  // resident_idle without work. False: every request takes the batched launches below.
  bool resident = true;
  int resident_ctas = 0;
  std::size_t resident_max_request_bytes = 2u << 20;
  std::chrono::milliseconds resident_idle{100};
  // While the worker's SMs are mostly idle, a chunk of at least 2 x resident_min_part_bytes is
  // split over up to resident_max_parts of them (1: never split): few callers then wait for part of
  // a chunk's time on the GPU instead of all of it.
  int resident_max_parts = 4;
  std::size_t resident_min_part_bytes = 16u << 10;
  // Tests only: the n-th batch (1-based) fails as if the GPU had, to exercise the fallback path;
  // with inject_failure_on_device, only batches launched on that GPU count (and it is that GPU that
  // fails: the engine's other GPUs take its work).
  int inject_failure_at_batch = 0;
  int inject_failure_on_device = -1;
  // Tests only: once the test sets it, the next batch launched (on inject_failure_on_device, where
  // that is set) fails the same way, and the flag goes back to false. Shared by the engines that
  // copies of these options build, so a test can fail a GPU mid-run whatever ran before.
  std::shared_ptr<std::atomic<bool>> inject_failure_now;
};

// True when this binary contains the CUDA kernels.
bool gpu_support_compiled();

// What every gpu engine of this process has launched so far (for benchmarks: requests per launch
// is what batching achieved).
struct GpuLaunchCounters {
  std::uint64_t launches = 0;  // batches sent to a GPU
  std::uint64_t pieces = 0;    // request pieces those batches carried
  std::uint64_t requests = 0;  // calls of seal or open that reached the GPU's queue
};
GpuLaunchCounters gpu_launch_counters();

// The GPUs this process can use. When there are none, *why_none (if given) says why in words a
// user can act on ("built without CUDA", "no CUDA driver", "no device").
std::vector<GpuInfo> list_gpus(std::string* why_none = nullptr);

// The NUMA node nearest to a GPU (of its PCI slot), -1 where unknown or without CUDA.
int gpu_numa_node(int device);

// Binds the calling thread to the CPUs of the GPU's NUMA node, on a host with more than one node;
// does nothing (and returns false) on one node, where the node is unknown, or without CUDA. The
// hybrid engine's feeder threads for that GPU call it.
bool bind_thread_near_gpu(int device);

// Throws UserError naming the GPU problem when no usable GPU is present. Batches that fail on
// the GPU are logged and redone on `fallback`, which must outlive the engine.
std::unique_ptr<ChunkEngine> make_gpu_engine(const GpuOptions& options, ChunkEngine& fallback);

// Kernel-only measurements for `gpucryptfs bench` and the GPU benchmarks: data already resident
// on the device, timed with CUDA events, median of several passes. Throw UserError without a GPU.
std::vector<std::string> gpu_kernel_variants();  // "coarse" (a thread per AES block), "fine" (several)
struct GpuKernelTiming {
  double seconds = 0;      // median seconds for one pass over total_bytes
  std::size_t bytes = 0;   // plaintext bytes per pass
};
// what: "ctr" (keystream and XOR only) or "seal" (CTR and GHASH, tags written).
// The floors under the engine's numbers, measured on `device`: an empty kernel's round trip, a
// 4 KiB copy there and back, pinned copy bandwidth each way and both at once, and one core's memcpy
// into pinned memory. Pairs of (name, value); names carry the unit.
std::vector<std::pair<std::string, double>> gpu_transfer_probe(int device = 0);
// The same pinned bandwidths with every listed GPU copying at once (summed over them): the host's
// ceiling for an engine spread over those GPUs. Names start with "all_N_gpus_".
std::vector<std::pair<std::string, double>> gpu_transfer_probe_all(const std::vector<int>& devices);

GpuKernelTiming gpu_kernel_benchmark(const std::string& variant, const std::string& what, std::size_t chunk_size,
                                     std::size_t total_bytes, int device = 0);

}  // namespace gcfs
