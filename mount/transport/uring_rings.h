// The io_uring transport's insides, shared by its three files: uring_transport.cc (the public
// calls: prepare, activate, stop), uring_registration.cc (building the rings and registering their
// entries with the kernel) and uring_serving.cc (each serving thread's loop and the requests it
// answers). Only those three include it; mount/transport/uring_transport.h says how it all works.
#pragma once

#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mount/transport/fuse_uring_abi.h"
#include "mount/transport/ring_request.h"
#include "mount/transport/request_channel.h"
#include "mount/transport/uring_transport.h"

struct fuse_session;

namespace gcfs::mount {

namespace abi = uring_abi;

// Entries each serving thread registers per queue it serves: one. A thread answers one request at
// a time, and the kernel gives a request to the first free entry of the queue: with two entries
// per thread, requests queued behind a busy thread's second entry while other threads sat idle
// (measured: 2-thread random 4 KiB writes 40% slower). Pipelining comes from the several threads
// per queue instead.
inline unsigned queue_depth(std::size_t) { return 1; }

// Serving threads: at least two per CPU queue, so that requests issued on one CPU (several
// programs there, or the kernel's writeback, which sends many WRITEs from one worker) are served
// together and the engine sees batches; at least --threads; at most 256 (beyond, threads share
// queues).
inline unsigned serving_threads(unsigned queues, unsigned max_threads) {
  return std::clamp(std::max(max_threads, 2 * queues), 1u, 256u);
}

// READs through the page cache from this size on are a stream's readahead (see Impl::take).
inline constexpr std::size_t kStreamReadMinBytes = 256 * 1024;

// A thread counts as serving a stream while its last readahead READ is this recent (a stream of
// 1 MiB readahead at 500 MB/s sends one every 2 ms).
inline constexpr std::int64_t kStreamingWindowNs = 20'000'000;

// One registered entry of one CPU queue, and the channel its requests come on (mount/transport/
// request_channel.h): a reply goes into the entry, whose commit sends it.
struct RingEntry final : RequestChannel {
  explicit RingEntry(CallerCharge* charge) : RequestChannel(false, charge) {}

  unsigned qid = 0;
  std::unique_ptr<abi::ReqHeader> header = std::make_unique<abi::ReqHeader>();
  HostBuffer memory;  // kRingPrefixBytes of room, then the payload
  unsigned char* payload = nullptr;
  std::size_t payload_bytes = 0;
  iovec iov[2]{};
  std::uint64_t commit_id = 0;
  bool answered = false;
  bool live = false;  // registered with the kernel, which has not refused it

  unsigned char* reply_room(std::size_t* bytes) override {
    *bytes = payload_bytes;
    return payload;
  }
  long send_reply(const iovec* iov_in, int count) override {
    const long res = store_ring_reply(iov_in, count, header.get(), payload, payload_bytes);
    if (res >= 0) answered = true;
    return res;
  }
};

// An io_uring, the thread that waits on it and the entries it registered. Only that thread
// submits on the ring; an entry's next request arrives on the ring that registered it.
struct RingThread {
  io_uring ring{};
  bool ring_ready = false;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::vector<unsigned> cpus;  // the queues (CPU numbers) this thread serves
  CallerCharge charge;         // the thread's, for the requests of all its entries
  std::vector<std::unique_ptr<RingEntry>> entries;
  // Completions seen while registering that are not refusals (a request fetched by an entry of an
  // earlier round, once the ring is complete): served first when serving starts.
  std::vector<std::pair<RingEntry*, int>> early;
  // Pinned to cpus, but while it serves a stream's readahead (Impl::place): then anywhere.
  // can_pin: the first pin worked (a cpuset may forbid it; then no request tries again).
  bool pinned = false, can_pin = false;
  std::int64_t last_stream_read_ns = 0;

  ~RingThread() {
    if (ring_ready) io_uring_queue_exit(&ring);
  }
};

// Registration goes in rounds, because a registered entry cannot be taken back but a refusal can
// be recovered from until the ring is complete (the kernel's fs/fuse/dev_uring.c):
//   - from the INIT reply that asked for io_uring, the kernel holds every new request until each
//     CPU queue has an entry (the ring is "ready"); from then on requests go to the ring, for the
//     rest of the connection;
//   - a REGISTER the kernel refuses switches io_uring off for the connection (fc->io_uring = 0)
//     and releases the held requests to /dev/fuse. Before the ring is ready, that is the way back.
// So round 1 registers every entry of every queue but the last, round 2 one entry of the last
// queue (the one that completes the ring), round 3 the rest. A failure in round 1 or 2 leaves the
// ring incomplete: one more REGISTER, malformed on purpose, makes sure the kernel has switched
// io_uring off whatever the failure was, and /dev/fuse serves. A refusal in round 3 costs that
// entry only: the ring is complete and serves with the others.
enum class Command { None, RegisterOthers, RegisterCompleting, RegisterRest, Withdraw, Serve };

struct UringTransport::Impl {
  fuse_session* se = nullptr;
  int fuse_fd = -1;
  UringOptions options;
  unsigned queues = 0;
  std::vector<std::unique_ptr<RingThread>> threads;
  bool stopped = false;
  int wake_fd = -1;  // one eventfd: every ring polls it, one write wakes them all
  unsigned last_queue = 0;
  RingEntry* completing = nullptr;        // round 2's entry
  RingEntry* refused_for_test = nullptr;  // UringOptions::refuse_for_test's entry
  char withdraw_tag = 0;                  // user data of the malformed REGISTER
  // The CPUs this process may run on when the ring threads started: where a thread serving a
  // stream goes (a cpuset narrower than the possible CPUs stays respected).
  std::vector<unsigned> allowed_cpus;

  ~Impl() {
    if (wake_fd >= 0) ::close(wake_fd);
  }

  // The threads' start-up, driven by prepare() and activate(): each thread reports once its ring
  // is built, then once per command it is given; Serve it does not report.
  std::mutex mu;
  std::condition_variable cv;
  unsigned generation = 0;  // bumped with every command
  Command command = Command::None;
  unsigned reported = 0;  // reports for the current command (or for the build)
  std::string failure;    // the first failure among them
  bool abort = false;     // stop() before or during start-up

  void report(const std::string& why) {
    std::lock_guard lk(mu);
    if (!why.empty() && failure.empty()) failure = why;
    ++reported;
    cv.notify_all();
  }
  // Until every thread reported; the first failure, or "stopped" when start-up was aborted.
  std::string wait_reports() {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return reported >= threads.size() || abort; });
    return abort ? std::string("stopped") : failure;
  }
  // Gives every thread command c and, but for Serve, waits for their reports.
  std::string post(Command c) {
    {
      std::lock_guard lk(mu);
      failure.clear();
      reported = 0;
      command = c;
      ++generation;
      cv.notify_all();
    }
    return c == Command::Serve ? std::string() : wait_reports();
  }

  // Registration (uring_registration.cc): each thread's ring and entries, and the rounds of
  // REGISTER that activate() drives (see Command).
  static void prepare_cmd(io_uring_sqe* sqe, RingEntry* e, std::uint32_t cmd);
  static void prepare_malformed_register(io_uring_sqe* sqe, unsigned qid, void* tag);
  std::string make_ring(RingThread& r, unsigned sqes);
  std::string build(RingThread& t);
  template <typename Pick>
  std::string register_entries(RingThread& t, Pick pick);
  std::string withdraw(RingThread& t);
  std::string act(RingThread& t, Command c);

  // Serving (uring_serving.cc): a thread's life, and each request it takes from its ring.
  void queue_commit(RingThread& t, RingEntry& e);
  void place(RingThread& t, const RingEntry& e);
  void take(RingThread& t, RingEntry& e);
  bool arm_stop_poll(RingThread& t);
  void answer_entry(RingEntry& e);
  void run(RingThread& t);
  void handle_completion(RingThread& t, void* data, int res, bool* ended);
  void serve_thread(RingThread& t);
};

}  // namespace gcfs::mount
