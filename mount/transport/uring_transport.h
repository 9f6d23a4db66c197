// FUSE over io_uring (Linux 6.14 and later; the kernel's Documentation/filesystems/
// fuse-io-uring.rst): the kernel keeps one request queue per CPU and places each request on the
// queue of the CPU that issued it. Each queue gets ring entries registered by the daemon: a
// header buffer and a payload buffer (the engine's memory, so a WRITE's data reaches the cipher
// where it landed). The daemon answers an entry and fetches the next request in one submission
// (COMMIT_AND_FETCH), with no read() or write() per request.
//
// Here each serving thread owns one io_uring with its own entries, for one CPU queue (at least two
// threads per queue, so one CPU's requests are served concurrently) or, beyond 256 threads, for
// several, and runs pinned to those CPUs. The kernel hands a request to any free entry of the issuing CPU's queue. Requests are
// handed to libfuse through dispatch_request (mount/transport/session_io.h) with their entry as
// the channel (mount/transport/request_channel.h), so the reply goes back into the entry, and the
// commit goes out with the thread's next wait: no locks, no hand-off.
//
// Except while a thread serves readahead: a large READ through the page cache, which the reader
// does not wait for, would have the thread wait for a CPU the reader keeps busy. A thread that
// gets one lifts its pin, so the scheduler runs it on an idle CPU, and pins itself again when
// other requests come after the stream (uring_serving.cc, Impl::place).
//
// The kernel uses the ring only once every CPU's queue has an entry, and registration only works
// after INIT was answered with FUSE_OVER_IO_URING. From that INIT reply the kernel holds every
// request until the ring is complete; a REGISTER it refuses before then switches io_uring off for
// the connection and hands the held requests to /dev/fuse, but once the ring is complete there is
// no way back. So everything that can fail on our side is done before INIT (prepare(): rings,
// buffers, threads; where that fails INIT does not ask for io_uring), and activate() registers
// after it in an order that keeps the ring incomplete until every other entry is in: a refusal up
// to that point still falls back to /dev/fuse (uring_rings.h, Command, says how).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "crypto/chunk_engine.h"

struct fuse_session;

namespace gcfs::mount {

struct UringOptions {
  unsigned max_threads = 16;
  // Every entry's payload room: at least what the kernel may put in one request.
  std::size_t payload_bytes = 1u << 20;
  std::function<HostBuffer(std::size_t)> allocate_buffer;  // null: ordinary memory
  std::function<void()> on_worker_start;
  // For tests only (GPUCRYPTFS_TEST_URING_REFUSE, mount/lifecycle/fuse_runner.cc): one REGISTER goes out
  // malformed, so that the kernel really refuses it: the first of the entries registered before
  // the ring is complete (Others), the one that would complete it (Completing), or one after
  // (Rest).
  enum class Refuse { None, Others, Completing, Rest };
  Refuse refuse_for_test = Refuse::None;
};

class UringTransport {
 public:
  // Builds the serving threads' rings and entries on /dev/fuse descriptor `fuse_fd`, registering
  // nothing yet. Null, with *why set to one line, when that fails (nothing is left running).
  static std::unique_ptr<UringTransport> prepare(fuse_session* se, int fuse_fd, const UringOptions& options,
                                                 std::string* why);
  // After INIT asked for io_uring: registers every entry and starts serving. kernel_payload_bytes:
  // the largest request INIT settled (each entry must hold it).
  //   Serving:  the ring is complete and serves (an entry refused after that only logs a warning);
  //   FellBack: it could not be completed (*why: the one-line reason); the kernel has switched
  //             io_uring off for this connection, the threads have stopped, and /dev/fuse carries
  //             every request: serve it with the classic loop;
  //   Failed:   neither (*why): the kernel still waits for a ring, the mount cannot serve.
  enum class Activation { Serving, FellBack, Failed };
  Activation activate(std::size_t kernel_payload_bytes, std::string* why);
  // Stops and joins the serving threads (idempotent). Requests the kernel still has queued for
  // the ring are ended by the unmount. Rings and buffers are released by the destructor, which
  // belongs after the unmount.
  void stop();
  ~UringTransport();
  std::string description() const;

  struct Impl;

 private:
  explicit UringTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The number of CPU queues the kernel keeps for a connection (its possible CPUs), from
// /sys/devices/system/cpu/possible ("0-15", "0,2-3"); 0 when unreadable.
unsigned possible_cpu_count();
unsigned possible_cpu_count_from(const std::string& list);

}  // namespace gcfs::mount
