// The classic transport (request_loop.h): worker threads that read /dev/fuse and dispatch.
#include "mount/transport/request_loop.h"

#include <linux/fuse.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "fs/log.h"
#include "mount/fuse_api.h"
#include "mount/transport/request_channel.h"
#include "mount/transport/session_io.h"

namespace gcfs::mount {
namespace {

// Sent to workers still blocked reading /dev/fuse once the session has exited (after SIGTERM, say,
// which only one thread receives): its handler does nothing, and since it is installed without
// SA_RESTART the read returns EINTR and the worker sees that the session is over.
constexpr int kWakeSignal = SIGUSR2;
void wake_handler(int) {}

// Large enough for any request: the kernel sends at most max_write (or max_pages pages) plus the
// headers. libfuse 3.14 would read at most 256 pages plus one; our custom read fills all of it.
std::size_t receive_buffer_bytes(std::size_t max_request) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t libfuse_reads = 256 * static_cast<std::size_t>(page > 0 ? page : 4096) + (64u << 10);
  return std::max(libfuse_reads, max_request + (64u << 10));
}

// A worker's channel (mount/transport/request_channel.h): its requests come from /dev/fuse and
// their replies go back there, from wherever they are.
class DevFuseChannel final : public RequestChannel {
 public:
  explicit DevFuseChannel(int fd) : RequestChannel(true, &charge_), fd_(fd) {}
  long send_reply(const iovec* iov, int count) override { return ::writev(fd_, iov, count); }
  unsigned char* reply_room(std::size_t* bytes) override {
    *bytes = 0;
    return nullptr;
  }
  int fd() const { return fd_; }

 private:
  CallerCharge charge_;  // the worker thread's
  int fd_;
};

// One request from /dev/fuse into mem, read as libfuse's fuse_session_receive_buf reads it, but
// filling all of mem: libfuse 3.14 would read at most its own 1 MiB and a page, too little for
// larger requests. Returns its bytes, 0 once the session is over, or -errno (-EINTR: a signal).
int receive_request(fuse_session* se, int fd, HostBuffer& mem) {
  for (;;) {
    const ssize_t res = ::read(fd, mem.data(), mem.size());
    const int err = errno;
    if (fuse_session_exited(se)) return 0;
    if (res < 0) {
      if (err == ENOENT) continue;  // the request was interrupted: safe to read again
      if (err == ENODEV) {          // unmounted, or the connection aborted
        fuse_session_exit(se);
        return 0;
      }
      if (err != EINTR && err != EAGAIN) std::perror("fuse: reading device");
      return -err;
    }
    if (static_cast<std::size_t>(res) < sizeof(fuse_in_header)) {
      fuse_log(FUSE_LOG_ERR, "short read on fuse device\n");
      return -EIO;
    }
    return static_cast<int>(res);
  }
}

// One request from /dev/fuse into mem, answered. 1: served; 2: served, and it was a single
// FORGET; 0: try again (a signal or an interrupted request); otherwise -errno (-ENODEV: unmounted).
int serve_one(fuse_session* se, HostBuffer& mem, DevFuseChannel& channel) {
  const int res = receive_request(se, channel.fd(), mem);
  if (res == -EINTR) return 0;  // a signal: the caller looks whether the session goes on
  if (res == 0) return -ENODEV;
  if (res < 0) return res;
  fuse_buf buf{};
  buf.mem = mem.data();
  buf.size = static_cast<std::size_t>(res);
  const std::uint32_t opcode = static_cast<const fuse_in_header*>(buf.mem)->opcode;
  dispatch_request(se, buf, channel);
  return opcode == FUSE_FORGET ? 2 : 1;
}

struct Worker {
  std::thread thread;
  std::atomic<bool> done{false};
};

}  // namespace

int answer_init(fuse_session* se, const RequestLoopOptions& o) {
  HostBuffer mem = HostBuffer::plain(receive_buffer_bytes(o.max_request));
  DevFuseChannel channel(fuse_session_fd(se));
  while (!fuse_session_exited(se)) {
    const int res = serve_one(se, mem, channel);
    if (res != 0) return res < 0 ? res : 0;
  }
  return -ENODEV;
}

int run_request_loop(fuse_session* se, const RequestLoopOptions& o, std::string* failure) {
  struct sigaction wake {}, old_wake {};
  wake.sa_handler = wake_handler;
  sigemptyset(&wake.sa_mask);
  wake.sa_flags = 0;  // no SA_RESTART: the blocked read must return
  ::sigaction(kWakeSignal, &wake, &old_wake);

  std::atomic<int> error{0};
  std::mutex mu;
  std::condition_variable cv;
  unsigned started = 0, failed = 0;  // workers holding their buffer / that could not get one
  std::string why;                   // the first failure
  const auto note_failure = [&](const std::string& what) {
    if (why.empty()) why = what;
  };
  const std::size_t bytes = receive_buffer_bytes(o.max_request);
  const unsigned n = o.threads ? o.threads : 1;
  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned i = 0; i < n; ++i) {
    auto w = std::make_unique<Worker>();
    Worker* self = w.get();
    try {
      w->thread = std::thread([&, self] {
        HostBuffer mem;
        try {
          if (o.on_worker_start) o.on_worker_start();
          mem = o.allocate_buffer ? o.allocate_buffer(bytes) : HostBuffer::plain(bytes);
        } catch (const std::exception& e) {  // nothing may leave a thread: it would end the process
          std::lock_guard lk(mu);
          note_failure(std::string("a request thread could not start (") + std::to_string(bytes >> 10) +
                       " KiB buffer): " + e.what());
          ++failed;
          self->done.store(true);
          cv.notify_all();
          return;
        }
        {
          std::lock_guard lk(mu);
          ++started;
          cv.notify_all();
        }
        DevFuseChannel channel(fuse_session_fd(se));
        while (!fuse_session_exited(se)) {
          const int res = serve_one(se, mem, channel);
          if (res < 0) {  // -ENODEV: unmounted; anything else is an error
            if (res != -ENODEV) error.store(-res);
            fuse_session_exit(se);
            break;
          }
          if (res == 2 && o.forget_pause_us) std::this_thread::sleep_for(std::chrono::microseconds(o.forget_pause_us));
        }
        self->done.store(true);
        std::lock_guard lk(mu);
        cv.notify_all();
      });
    } catch (const std::system_error& e) {
      std::lock_guard lk(mu);
      note_failure(std::string("cannot start a request thread: ") + e.what());
      break;
    }
    workers.push_back(std::move(w));
  }
  {
    // Every worker either serves or gave up: the mount is ready with those that serve, or cannot
    // serve at all.
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return started + failed == workers.size(); });
    if (started == 0) {
      if (why.empty()) why = "no request thread could start";
      if (failure) *failure = why;
      error.store(ENOMEM);
      fuse_session_exit(se);
    } else if (started < n) {
      log::warning("serving with " + std::to_string(started) + " of " + std::to_string(n) + " request threads: " + why);
    }
  }
  if (started > 0 && o.on_ready) o.on_ready();

  {
    // Signal handlers do not wake a condition variable: look at the session now and then too.
    std::unique_lock lk(mu);
    while (!fuse_session_exited(se)) cv.wait_for(lk, std::chrono::milliseconds(100));
  }
  // Wake the workers still waiting for a request. A wake-up can land just before a worker enters
  // read(), so it is repeated until every worker has left its loop.
  for (;;) {
    bool all_done = true;
    for (auto& w : workers)
      if (!w->done.load()) {
        all_done = false;
        ::pthread_kill(w->thread.native_handle(), kWakeSignal);
      }
    if (all_done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& w : workers) w->thread.join();
  ::sigaction(kWakeSignal, &old_wake, nullptr);
  return -error.load();
}

}  // namespace gcfs::mount
