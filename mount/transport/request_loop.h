// The daemon's request loop: a fixed pool of worker threads, each reading FUSE requests into its
// own receive buffer and answering them, until the session ends.
//
// libfuse's fuse_session_loop_mt allocates every worker's receive buffer itself, with malloc, and
// starts workers lazily under load. Ours come from the engine (page-locked with the gpu engine, so
// a WRITE's data reaches the GPU with no copy at all), and each worker sizes its per-thread
// buffers once before serving, instead of in the middle of the first large requests.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "crypto/chunk_engine.h"

struct fuse_session;

namespace gcfs::mount {

// The largest READ or WRITE the daemons' init callbacks ask for (their max_write and
// max_readahead); libfuse 3.14 caps requests there. The INIT reply raises it to
// max_request_bytes() (mount/transport/transport.h) where the kernel allows more.
inline constexpr std::size_t kMaxRequestBytes = 1u << 20;

struct RequestLoopOptions {
  unsigned threads = 16;
  // Receive buffers; null: ordinary memory.
  std::function<HostBuffer(std::size_t)> allocate_buffer;
  // Runs on each worker before it serves its first request.
  std::function<void()> on_worker_start;
  // The largest READ or WRITE the kernel may send (sizes the receive buffers).
  std::size_t max_request = kMaxRequestBytes;
  // Runs once every worker has started and holds its buffer (or could not, and is left out, with
  // a warning): the mount is ready. Not run when no worker could start.
  std::function<void()> on_ready;
  // How long a worker waits after a lone FORGET before it reads again (0: not at all). Where
  // /dev/fuse carries little but FORGETs (FUSE over io_uring serves the rest), reading again at
  // once costs a read and a wake-up for every inode the kernel lets go (rm -rf: one per file);
  // meanwhile the kernel queues the next ones, and the next read takes them all in one
  // BATCH_FORGET. After a batch it reads again at once: FORGETs are piling up, and each holds
  // what its inode keeps (a removed file's descriptor), which must not pile up with them.
  unsigned forget_pause_us = 0;
};

// Reads and answers the kernel's first request, INIT, on the calling thread. Returns 0, -ENODEV
// when the session ended first (unmounted, or a signal), or -errno when reading failed.
int answer_init(fuse_session* se, const RequestLoopOptions& options);

// Serves until the session exits (unmounted, or a signal handler installed with
// fuse_set_signal_handlers). Returns 0, or -errno when reading /dev/fuse failed or no worker could
// start (no thread, no memory for its buffer: *failure, when given, says which; on_ready was
// not run then).
int run_request_loop(fuse_session* se, const RequestLoopOptions& options, std::string* failure = nullptr);

}  // namespace gcfs::mount
