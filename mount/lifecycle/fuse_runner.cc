// The life of one mount (fuse_runner.h): mount, detach, settle the transport, serve, unmount.
#include "mount/lifecycle/fuse_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "fs/log.h"
#include "mount/cli/commands.h"
#include "mount/daemon/fd_limit.h"
#include "mount/fuse_api.h"
#include "mount/lifecycle/kernel_mount_options.h"
#include "mount/lifecycle/owned_mount.h"
#include "mount/transport/request_loop.h"
#include "mount/transport/session_io.h"
#include "mount/lifecycle/stop_signals.h"
#include "mount/transport/uring_transport.h"

namespace gcfs::mount {
namespace {

struct Failure {
  int code;
  std::string message;
};

// fuse_opt treats ',' as a separator and '\' as an escape inside one -o argument.
std::string escape_option_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string mount_option_string(const MountOptions& o) {
  // default_permissions: the kernel checks modes and owners, so a daemon running as root (or with
  // allow_other) never grants more than the files' modes do.
  std::string s = "default_permissions,subtype=" + o.subtype;
  if (!o.fsname.empty()) s += ",fsname=" + escape_option_value(o.fsname);
  if (o.read_only) s += ",ro";
  if (o.allow_other) s += ",allow_other";
  for (const auto& e : o.extra_options)
    if (!e.empty()) s += "," + e;
  return s;
}

struct SessionDeleter {
  void operator()(fuse_session* se) const { fuse_session_destroy(se); }
};
using SessionPtr = std::unique_ptr<fuse_session, SessionDeleter>;

// The mount this process serves, for what ends it from outside the request loop: --idle
// (unmount_served_mount) and the stop signals. One per process; `mu` is held while either uses it,
// so that they take turns and the session cannot go while one of them is at work.
struct ServedMount {
  std::mutex mu;
  fuse_session* se = nullptr;
  OwnedMount* owned = nullptr;  // as root: the mount the daemon made itself, once made
  std::string mountpoint;       // a user's daemon: what fusermount3 -u is given
};
ServedMount g_served;

// A user's daemon unmounts as its user can: fusermount3, which checks that the mount is theirs.
bool fusermount_unmount(const std::string& mountpoint) {
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    ::execlp("fusermount3", "fusermount3", "-u", "-q", mountpoint.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

// SIGHUP, SIGINT or SIGTERM, on StopSignals' thread. As root: the mount this daemon made is
// unmounted where it is now, while the request threads still answer what the unmount asks; a busy
// one is detached (lazily: the signal must end the daemon, as libfuse's lazy unmount did), this
// mount and never whatever a path leads to. Then the session ends, also when copies of the mount
// in other mount namespaces keep it alive. A user's daemon ends its session, and libfuse unmounts
// through fusermount3 (MountedSession).
void on_stop_signal(int sig) {
  std::lock_guard lk(g_served.mu);
  if (!g_served.se) return;
  if (OwnedMount* m = g_served.owned) {
    const std::string why = signal_name(sig);
    log::info(why + ": unmounting");
    UnmountResult r = m->unmount(false);
    if (r == UnmountResult::Busy) {
      log::warning(why + ": the mount is busy (a process holds something on it): detaching it, lazily; whoever "
                         "still uses it gets errors from now on");
      r = m->unmount(true);
    }
    if (r == UnmountResult::Refused)
      log::warning(why + ": ending with the mount left in place (see the line above); it answers nothing from now "
                         "on: unmount it with umount");
  }
  fuse_session_exit(g_served.se);
}

// Registers the session (and, once made, the mount) in g_served from before the mount until the
// serving ends; unregistered on every way out, exceptions included, before the session and the
// mount go.
class ServedRegistration {
 public:
  ServedRegistration(fuse_session* se, const std::string& mountpoint) {
    std::lock_guard lk(g_served.mu);
    g_served.se = se;
    g_served.mountpoint = mountpoint;
  }
  ServedRegistration(const ServedRegistration&) = delete;
  ~ServedRegistration() { clear(); }
  void set_owned(OwnedMount* m) {
    std::lock_guard lk(g_served.mu);
    g_served.owned = m;
  }
  // Waits for an unmount under way (--idle, a signal's).
  void clear() {
    std::lock_guard lk(g_served.mu);
    g_served.se = nullptr;
    g_served.owned = nullptr;
    g_served.mountpoint.clear();
  }
};

// Removes the signal handlers and unregisters the mount on every way out of serve() after the
// mount, exceptions included; a user's daemon unmounts here too (libfuse: fusermount3 -u -z).
class MountedSession {
 public:
  MountedSession(fuse_session* se, std::unique_ptr<StopSignals> signals, ServedRegistration& served, bool owned)
      : se_(se), signals_(std::move(signals)), served_(served), owned_(owned) {}
  MountedSession(const MountedSession&) = delete;
  ~MountedSession() {
    signals_.reset();  // waits for a signal's unmount under way
    served_.clear();
    // As root libfuse was handed the descriptor (/dev/fd/N) and has no mount of its own to undo.
    if (!owned_) fuse_session_unmount(se_);
  }

 private:
  fuse_session* se_;
  std::unique_ptr<StopSignals> signals_;
  ServedRegistration& served_;
  bool owned_;
};

// What the daemon mounted itself and is still there once the session (and /dev/fuse with it) has
// gone, on every way out of serve(): a mount that failed to start serving, or one that ended
// without an unmount (a read error, a refused signal's unmount). With /dev/fuse closed the
// kernel fails the mount's requests at once, so no unmount waits for a reply that cannot come.
struct UnmountWhenDone {
  std::unique_ptr<OwnedMount> mount;
  UnmountWhenDone() = default;
  UnmountWhenDone(const UnmountWhenDone&) = delete;
  ~UnmountWhenDone() { finish(); }
  void finish() {
    if (!mount) return;
    UnmountResult r = mount->unmount(false);
    if (r == UnmountResult::Busy) {
      log::warning("the mount is busy (a process holds something on it): detaching it, lazily");
      r = mount->unmount(true);
    }
    if (r == UnmountResult::Refused)
      log::warning("the mount stays in place (see the line above) and answers nothing: unmount it with umount");
    mount.reset();
  }
};

void write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// The child's report to the waiting parent: "ok\n", or "<code> <message>".
void report(int fd, const std::optional<Failure>& f) {
  if (fd < 0) return;
  write_all(fd, f ? std::to_string(f->code) + " " + f->message : std::string("ok\n"));
  ::close(fd);
}

// Raises the mount's readahead window through its backing-device entry in sysfs. device:
// "major:minor", from /proc/self/mountinfo (a stat of our own mountpoint would be a FUSE request,
// and while it is pending the mount is busy and cannot be unmounted).
void raise_read_ahead(const std::string& device, unsigned kb) {
  if (kb == 0 || device.empty()) return;
  const std::string path = "/sys/class/bdi/" + device + "/read_ahead_kb";
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;  // no sysfs (some containers): the kernel's default stays
  write_all(fd, std::to_string(kb));
  ::close(fd);
}

// GPUCRYPTFS_TEST_URING_REFUSE=others|completing|rest: the test suites' way to have the kernel
// refuse one ring entry's registration (UringOptions::refuse_for_test), which nothing else can
// make happen on demand.
UringOptions::Refuse uring_refusal_for_test() {
  const char* v = std::getenv("GPUCRYPTFS_TEST_URING_REFUSE");
  const std::string s = v ? v : "";
  if (s == "others") return UringOptions::Refuse::Others;
  if (s == "completing") return UringOptions::Refuse::Completing;
  if (s == "rest") return UringOptions::Refuse::Rest;
  return UringOptions::Refuse::None;
}

void detach_stdio() {
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) return;
  ::dup2(null, STDIN_FILENO);
  ::dup2(null, STDOUT_FILENO);
  ::dup2(null, STDERR_FILENO);
  if (null > STDERR_FILENO) ::close(null);
}

// Mounts the session on o.mountpoint. Root mounts itself, on the directory the path names now
// with no symbolic link followed, and hands libfuse the descriptor (/dev/fd/N), which it then
// neither mounts nor unmounts: libfuse's own mount as root is mount(2) on the path, and its
// unmount a lazy umount2 of the path looked up again. A user's daemon mounts through libfuse.
std::optional<Failure> mount_session(fuse_session* se, const MountOptions& o, const std::string& opts,
                                     UnmountWhenDone& owned, ServedRegistration& served) {
  if (::geteuid() != 0) {
    if (fuse_session_mount(se, o.mountpoint.c_str()) == 0) return std::nullopt;
    return Failure{1, "cannot mount on " + o.mountpoint + " (libfuse's reason is printed above; is /dev/fuse there "
                      "and fusermount3 installed?)"};
  }
  try {
    owned.mount = OwnedMount::mount(o.mountpoint, kernel_mount_options(opts), cli::kExitBadMountpoint);
  } catch (const MountFailure& e) {
    return Failure{e.exit_code, e.what()};
  } catch (const std::invalid_argument& e) {
    return Failure{1, "cannot mount on " + o.mountpoint + ": " + e.what()};
  }
  served.set_owned(owned.mount.get());
  const int fd = owned.mount->release_fuse_fd();
  if (fuse_session_mount(se, ("/dev/fd/" + std::to_string(fd)).c_str()) != 0) {
    ::close(fd);
    return Failure{1, "cannot hand the mount's /dev/fuse descriptor to libfuse (its reason is printed above)"};
  }
  return std::nullopt;
}

// The rings, built before INIT: once INIT asks for io_uring, the kernel waits for them. Null, with
// *why, where they cannot be had.
std::unique_ptr<UringTransport> prepare_rings(fuse_session* se, const MountOptions& o, const FuseFilesystem& fs,
                                              std::size_t max_request, std::string* why) {
  UringOptions u;
  u.max_threads = o.max_threads;
  u.payload_bytes = max_request;  // what INIT asks for at most (mount/transport/ring_request.h)
  u.allocate_buffer = fs.allocate_buffer;
  u.on_worker_start = fs.on_worker_start;
  u.refuse_for_test = uring_refusal_for_test();
  return UringTransport::prepare(se, fuse_session_fd(se), u, why);
}

// After INIT: the rings serve from here on, or are let go (ring null, *why says why) where INIT
// did not settle io_uring or they could not be completed. A Failure where the mount cannot serve.
std::optional<Failure> activate_rings(const MountOptions& o, std::unique_ptr<UringTransport>& ring, std::string* why) {
  const InitOutcome& init = init_outcome();
  if (ring && !init.uring_negotiated) {
    ring.reset();  // nothing was registered
    *why = "the kernel did not offer io_uring in FUSE_INIT";
    if (o.transport == Transport::Uring) return Failure{1, "--transport uring: " + *why};
  }
  if (!ring) return std::nullopt;
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t kernel_payload =
      std::max({std::size_t{8192}, init.max_write, init.max_pages * static_cast<std::size_t>(page > 0 ? page : 4096)});
  switch (ring->activate(kernel_payload, why)) {
    case UringTransport::Activation::Serving:
      break;
    case UringTransport::Activation::FellBack:
      ring.reset();  // its threads have stopped; the kernel sends everything to /dev/fuse
      if (o.transport == Transport::Uring) return Failure{1, "--transport uring: " + *why};
      break;
    case UringTransport::Activation::Failed:
      // The kernel holds every request for a ring that cannot be completed: unmount.
      log::error("io_uring: " + *why);
      return Failure{1, "FUSE over io_uring could not be set up: " + *why + " (mount with --transport classic)"};
  }
  return std::nullopt;
}

// Settles how requests travel: builds the rings where io_uring is wanted (want_uring; uring_off
// says why it is not), takes over the session's I/O, answers INIT on this thread and activates
// the rings. Sets up `loop` for the request loop that serves what comes on /dev/fuse: everything,
// or, beside the rings, only FORGET, INTERRUPT and the like.
std::optional<Failure> start_transport(fuse_session* se, const MountOptions& o, const FuseFilesystem& fs,
                                       bool want_uring, const std::string& uring_off, std::size_t max_request,
                                       rlim_t open_files, std::unique_ptr<UringTransport>& ring,
                                       RequestLoopOptions& loop) {
  std::string why = o.transport == Transport::Classic ? "--transport classic" : uring_off;
  if (want_uring) {
    ring = prepare_rings(se, o, fs, max_request, &why);
    if (!ring && o.transport == Transport::Uring) return Failure{1, "--transport uring: " + why};
  }
  SessionIoOptions io;
  io.want_uring = ring != nullptr;
  io.max_request = max_request;
  io.tmpfile_as_create = fs.tmpfile_as_create;
  io.killpriv_v2 = fs.kills_setid_on_write;
  io.direct_read = fs.direct_read;
  io.direct_write = fs.direct_write;
  io.direct_ctx = fs.userdata;
  if (const int rc = install_session_io(se, fuse_session_fd(se), io); rc != 0)
    return Failure{1, std::string("cannot take over the FUSE session's I/O: ") + std::strerror(-rc)};
  // Logged before the parent hears "ok": whoever ran `mount` finds the serving pid in the log
  // as soon as the command returns.
  log::info("mounted on " + o.mountpoint);
  log::info("descriptor limit: " + std::to_string(open_files) + " open files");
  loop.threads = o.max_threads;
  loop.allocate_buffer = fs.allocate_buffer;
  loop.on_worker_start = fs.on_worker_start;
  loop.max_request = max_request;
  // INIT first, on this thread: before it is answered the first program to touch the mount
  // waits and an unmount finds the mount busy, so `mount` returns only after it; and the ring
  // can only be registered once the kernel has read the reply.
  if (const int rc = answer_init(se, loop); rc < 0) {
    if (rc != -ENODEV) log::error(std::string("reading FUSE_INIT from /dev/fuse failed: ") + std::strerror(-rc));
    return Failure{1, "the kernel's FUSE_INIT was not answered: " +
                          std::string(rc == -ENODEV ? "the mount ended first" : std::strerror(-rc))};
  }
  if (auto f = activate_rings(o, ring, &why)) return f;
  if (ring) {
    log::info("transport: io_uring, " + ring->description());
    loop.threads = 2;  // /dev/fuse now carries only FORGET, INTERRUPT and the like
    // FORGETs gathered into batches (RequestLoopOptions): rm -rf of a tree sent one read and one
    // wake-up per removed file. An INTERRUPT waits at most this long behind a FORGET.
    loop.forget_pause_us = 500;
  } else {
    log::info("transport: /dev/fuse, because " + why);
  }
  log::info("largest request: " + std::to_string(init_outcome().max_write >> 10) + " KiB");
  return std::nullopt;
}

// Mounts and serves. report_fd >= 0: we are the detached child and tell the parent through it.
// Returns the failure of setup or mount, or nullopt once the mount ran and ended.
std::optional<Failure> serve(const MountOptions& o, const std::function<FuseFilesystem()>& setup,
                             const std::function<int(const std::exception&)>& error_code_of, int report_fd,
                             int* loop_status) {
  const rlim_t open_files = raise_open_file_limit();
  // A detached mount keeps the terminal until it reports ready: what setup warns of shows there.
  log::echo_warnings_to_stderr(report_fd >= 0);
  FuseFilesystem fs;
  try {
    fs = setup();
  } catch (const MountFailure& e) {
    return Failure{e.exit_code, e.what()};
  } catch (const std::exception& e) {
    return Failure{error_code_of(e), e.what()};
  }

  // Decided before mounting: `uring` where the kernel cannot have it is refused with its reason.
  const std::string uring_off = o.transport == Transport::Classic ? "" : uring_unavailable_reason();
  if (o.transport == Transport::Uring && !uring_off.empty())
    return Failure{1, "--transport uring: " + uring_off};
  const bool want_uring = o.transport != Transport::Classic && uring_off.empty();
  const std::size_t max_request = max_request_bytes();

  // Declared before the session, so that it goes after it (mount/lifecycle/owned_mount.h).
  UnmountWhenDone owned;
  const std::string opts = mount_option_string(o);
  const char* argv[] = {"gpucryptfs", "-o", opts.c_str(), nullptr};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  // libfuse checks the options here as it always has, also where the daemon mounts itself.
  SessionPtr se(fuse_session_new(&args, fs.ops, sizeof(fuse_lowlevel_ops), fs.userdata));
  fuse_opt_free_args(&args);
  if (!se) return Failure{1, "cannot create the FUSE session: bad mount options '" + opts + "'"};
  ServedRegistration served(se.get(), ::geteuid() == 0 ? std::string() : o.mountpoint);
  std::unique_ptr<StopSignals> signals;
  try {
    signals = std::make_unique<StopSignals>(on_stop_signal);
  } catch (const std::exception& e) {
    return Failure{1, std::string("cannot install signal handlers: ") + e.what()};
  }
  if (auto f = mount_session(se.get(), o, opts, owned, served)) return f;
  auto served_at = std::chrono::steady_clock::now();
  long long rings_stop_ms = 0;
  {
    // Released after MountedSession (declared first, destroyed last), before the engine goes.
    std::unique_ptr<UringTransport> ring;
    MountedSession mounted(se.get(), std::move(signals), served, owned.mount != nullptr);
    RequestLoopOptions loop;
    if (auto f = start_transport(se.get(), o, fs, want_uring, uring_off, max_request, open_files, ring, loop)) return f;
    if (o.read_ahead_kb && owned.mount)  // root only: sysfs is root's
      raise_read_ahead(owned.mount->device(), std::max<unsigned>(o.read_ahead_kb, static_cast<unsigned>(max_request >> 10)));
    // The parent hears "ok" once the request threads serve (with their buffers): where none can
    // start, the mount fails with the reason instead of dying after `mount` returned.
    bool ready = false;
    loop.on_ready = [&] {
      ready = true;
      if (report_fd < 0) return;
      log::echo_warnings_to_stderr(false);
      report(report_fd, std::nullopt);
      detach_stdio();
      if (::chdir("/") != 0) { /* only matters for unmounting the cwd's filesystem */ }
    };
    std::string loop_failure;
    *loop_status = run_request_loop(se.get(), loop, &loop_failure);
    // Unmounted from outside (fusermount3 -u, umount): nothing left to undo, and the mount's ID
    // may be another mount's by now.
    if (owned.mount && OwnedMount::connection_ended(fuse_session_fd(se.get()))) {
      served.set_owned(nullptr);  // first: a signal's unmount takes it under the same lock
      owned.mount.reset();
    }
    const auto loop_ended = std::chrono::steady_clock::now();
    if (ring) ring->stop();
    if (fs.on_served) fs.on_served();
    served_at = std::chrono::steady_clock::now();
    rings_stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(served_at - loop_ended).count();
    if (!ready) {
      log::error("cannot serve requests: " + loop_failure);
      return Failure{1, "cannot serve requests: " + loop_failure};
    }
    if (*loop_status < 0) log::error(std::string("reading requests from /dev/fuse failed: ") + std::strerror(-*loop_status));
  }
  se.reset();  // runs the filesystem's destroy callback before userdata goes
  owned.finish();
  fs.keep_alive.reset();
  const auto teardown_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - served_at).count();
  log::info("unmounted " + o.mountpoint + " (stopping the serving threads: " + std::to_string(rings_stop_ms) +
            " ms; teardown after them: " + std::to_string(teardown_ms) + " ms)");
  return std::nullopt;
}

// The parent of a detached mount: waits for the child's report.
int wait_for_child(pid_t child, int read_fd) {
  std::string msg;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(read_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    msg.append(buf, static_cast<std::size_t>(n));
  }
  ::close(read_fd);
  if (msg == "ok\n") return 0;
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  auto sp = msg.find(' ');
  if (!msg.empty() && sp != std::string::npos) throw MountFailure(std::stoi(msg.substr(0, sp)), msg.substr(sp + 1));
  std::string why = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                        : "exited with status " + std::to_string(WEXITSTATUS(status));
  throw MountFailure(1, "the mount process " + why + " before the mount was ready");
}

}  // namespace

void check_mountpoint(const std::string& path, int code, bool allow_nonempty) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw MountFailure(code, "mountpoint " + path + ": " + std::strerror(errno) + " (create it with mkdir first)");
  if (!S_ISDIR(st.st_mode)) throw MountFailure(code, "mountpoint " + path + " is not a directory");
  DIR* d = ::opendir(path.c_str());
  if (!d) throw MountFailure(code, "mountpoint " + path + ": " + std::strerror(errno));
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  if (!empty && !allow_nonempty)
    throw MountFailure(code, "mountpoint " + path + " is not empty (mount on an empty directory, or give --nonempty "
                             "to hide what it holds while mounted)");
}

int run_fuse_mount(const MountOptions& o, const std::function<FuseFilesystem()>& setup,
                   const std::function<int(const std::exception&)>& error_code_of) {
  int loop_status = 0;
  if (o.foreground) {
    auto f = serve(o, setup, error_code_of, -1, &loop_status);
    if (f) throw MountFailure(f->code, f->message);
    return loop_status == 0 ? 0 : 1;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw MountFailure(1, std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw MountFailure(1, std::string("fork: ") + std::strerror(errno));
  if (pid > 0) {
    ::close(fds[1]);
    return wait_for_child(pid, fds[0]);
  }
  ::close(fds[0]);
  ::setsid();
  auto f = serve(o, setup, error_code_of, fds[1], &loop_status);
  if (f) {
    report(fds[1], f);
    ::_exit(f->code);
  }
  return loop_status == 0 ? 0 : 1;
}

UnmountResult unmount_served_mount() {
  std::lock_guard lk(g_served.mu);
  if (!g_served.se) return UnmountResult::Gone;
  if (g_served.owned) return g_served.owned->unmount(false);
  if (g_served.mountpoint.empty()) return UnmountResult::Busy;  // not mounted yet
  return fusermount_unmount(g_served.mountpoint) ? UnmountResult::Unmounted : UnmountResult::Busy;
}

void announce_detached_log(const std::string& file) {
  if (file.empty()) return;
  log::warning("no syslog daemon listens on /dev/log: this mount logs to " + file + " (choose another file with --log)");
}

}  // namespace gcfs::mount
