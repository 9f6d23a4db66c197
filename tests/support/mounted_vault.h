// A real gpucryptfs mount for a test, made and torn down by RAII: temporary CIPHERDIR and
// MOUNTPOINT, `gpucryptfs init` with a passfile (scrypt logn 10, so unlocking is fast), `gpucryptfs
// mount --log`, and in the destructor ALWAYS an unmount (fusermount3 -u, then lazy, then the
// daemon is killed by its pid) and the removal of the temporary folders; also when the test failed.
//
// The engine is GPUCRYPTFS_TEST_ENGINE (cpu when unset), so one suite runs on the GPU machine with
// GPUCRYPTFS_TEST_ENGINE=gpu; GPUCRYPTFS_TEST_TRANSPORT (auto when unset) is every mount's
// --transport, so CI runs the mounted suites once over /dev/fuse (classic) and once over io_uring
// (uring, which refuses to mount rather than fall back); GPUCRYPTFS_TEST_MOUNT_ARGS adds mount
// options to every mount; GPUCRYPTFS_TEST_FORMAT=1 or 2 makes every test vault of that content
// format (ctest runs the mounted and fsck suites under both: tests/CMakeLists.txt). The
// binary is GPUCRYPTFS_BIN, which the build defines, or GPUCRYPTFS_TEST_BIN when set.
//
//   gcfs::test::MountedVault v;
//   write_file(v.path("a.txt"), "hello");
//   v.remount();                       // unmount and mount again
//   EXPECT_EQ(v.sh("cat a.txt"), "hello");
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef GPUCRYPTFS_BIN
#error "GPUCRYPTFS_BIN must name the gpucryptfs binary"
#endif

namespace gcfs::test {

// The binary under test: GPUCRYPTFS_TEST_BIN when set (a binary built elsewhere, e.g. with CUDA
// for the GPU machine), else the one this build made.
inline std::string test_binary() {
  const char* b = std::getenv("GPUCRYPTFS_TEST_BIN");
  return b && *b ? b : GPUCRYPTFS_BIN;
}

// The content format of the test vaults: GPUCRYPTFS_TEST_FORMAT, or what `init` makes by default
// (kInitDefaultFormat; the CLI test checks that init agrees). Only an explicit GPUCRYPTFS_TEST_FORMAT
// is passed to init as --format, so that an older binary (GPUCRYPTFS_TEST_BIN) still runs.
constexpr int kInitDefaultFormat = 2;
inline int test_format_asked() {
  const char* f = std::getenv("GPUCRYPTFS_TEST_FORMAT");
  return f && *f ? std::atoi(f) : 0;
}
inline int test_format() { return test_format_asked() ? test_format_asked() : kInitDefaultFormat; }

inline std::string test_engine() {
  const char* e = std::getenv("GPUCRYPTFS_TEST_ENGINE");
  return e && *e ? e : "cpu";
}

inline std::string test_transport() {
  const char* t = std::getenv("GPUCRYPTFS_TEST_TRANSPORT");
  return t && *t ? t : "auto";
}
// " --transport X", for every command line that mounts.
inline std::string transport_arg() { return " --transport " + test_transport(); }

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

struct CommandResult {
  int status = -1;  // exit status, or 128 + signal
  std::string output;  // stdout and stderr together
};

// Runs a bash script, in dir when given; never throws.
inline CommandResult run_shell(const std::string& script, const std::string& dir = "") {
  std::string cmd = dir.empty() ? "" : "cd " + shell_quote(dir) + " && ";
  cmd = "bash -c " + shell_quote(cmd + script) + " 2>&1";
  CommandResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}

// Outside CI (on the GPU machine, say) a program a test drives may be missing: such a test skips
// and says so instead of failing with "command not found". CI installs them all.
inline bool have_program(const std::string& name) {
  return run_shell("command -v " + shell_quote(name) + " >/dev/null 2>&1").status == 0;
}
#define GCFS_REQUIRE_PROGRAM(name) \
  if (!::gcfs::test::have_program(name)) GTEST_SKIP() << (name) << " is not installed on this machine"

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  if (!out) throw std::runtime_error("cannot write " + path);
}

// A temporary directory, removed with everything in it: in parent when given, else in TMPDIR or
// /tmp.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "gcfs", const std::string& parent = "") {
    const char* base = std::getenv("TMPDIR");
    const std::string where = !parent.empty() ? parent : std::string(base && *base ? base : "/tmp");
    std::string templ = where + "/" + tag + ".XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  TempDir(const TempDir&) = delete;
  ~TempDir() {
    if (!path_.empty()) run_shell("rm -rf " + shell_quote(path_));
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Extra `gpucryptfs mount` arguments for every test mount (GPUCRYPTFS_TEST_MOUNT_ARGS, split on
// spaces), so the whole suite can run with, say, --no-writeback-cache.
inline std::vector<std::string> test_mount_args() {
  std::vector<std::string> out;
  const char* e = std::getenv("GPUCRYPTFS_TEST_MOUNT_ARGS");
  std::istringstream in(e ? e : "");
  for (std::string a; in >> a;) out.push_back(a);
  return out;
}

struct VaultOptions {
  std::string engine = test_engine();
  unsigned chunk_size = 0;                // 0: the default
  int format = test_format_asked();       // 0: init's default
  std::vector<std::string> mount_args = test_mount_args();  // extra arguments for `gpucryptfs mount`
  bool mount = true;                      // mount in the constructor
  std::string shell_prefix;               // run before `gpucryptfs mount` in its shell (ulimit, env)
  std::string password = "correct horse battery staple";
  std::string parent_dir;                 // where CIPHERDIR and MOUNTPOINT go; empty: TMPDIR or /tmp
  std::string transport = test_transport();  // --transport of every mount
};

class MountedVault {
 public:
  explicit MountedVault(VaultOptions o = {}) : opts_(std::move(o)), root_("gcfs-test", opts_.parent_dir) {
    cipherdir_ = root_.path() + "/cipher";
    mountpoint_ = root_.path() + "/plain";
    passfile_ = root_.path() + "/passfile";
    log_ = root_.path() + "/gpucryptfs.log";
    ::mkdir(cipherdir_.c_str(), 0700);
    ::mkdir(mountpoint_.c_str(), 0755);
    write_file(passfile_, opts_.password + "\n");
    ::chmod(passfile_.c_str(), 0600);  // a password file others can read is warned about
    std::string init = test_binary() + " init --scrypt-logn 10 --passfile " + shell_quote(passfile_);
    if (opts_.chunk_size) init += " --chunk-size " + std::to_string(opts_.chunk_size);
    if (opts_.format) init += " --format " + std::to_string(opts_.format);
    auto r = run_shell(init + " " + shell_quote(cipherdir_));
    if (r.status != 0) throw std::runtime_error("gpucryptfs init failed: " + r.output);
    if (opts_.mount) mount();
  }
  MountedVault(const MountedVault&) = delete;
  ~MountedVault() {
    // A failing test shows the daemon's last words: on the GPU machine they are all that comes back.
    if (::testing::Test::HasFailure()) {
      auto r = run_shell("tail -20 " + shell_quote(log_) + " 2>/dev/null");
      std::fprintf(stderr, "daemon log tail (%s):\n%s", log_.c_str(), r.output.c_str());
    }
    unmount();
  }

  const std::string& cipherdir() const { return cipherdir_; }
  const std::string& mountpoint() const { return mountpoint_; }
  const std::string& passfile() const { return passfile_; }
  const std::string& log_path() const { return log_; }
  std::string log() const { return read_file(log_); }
  std::string path(const std::string& rel) const { return mountpoint_ + "/" + rel; }
  std::string binary() const { return test_binary(); }
  bool mounted() const { return mounted_; }

  // The mount command line, so tests can vary it.
  std::string mount_command() const {
    std::string cmd = opts_.shell_prefix + test_binary() + " mount --passfile " + shell_quote(passfile_) + " --engine " +
                      opts_.engine + " --transport " + opts_.transport + " --log " + shell_quote(log_);
    for (const auto& a : opts_.mount_args) cmd += " " + a;
    return cmd + " " + shell_quote(cipherdir_) + " " + shell_quote(mountpoint_);
  }

  void mount() {
    if (mounted_) return;
    auto r = run_shell(mount_command());
    if (r.status != 0) throw std::runtime_error("gpucryptfs mount failed (" + std::to_string(r.status) + "): " + r.output +
                                                "\nlog:\n" + log());
    mounted_ = true;
    daemon_pid_ = pid_from_log();
    // Without the pid, unmount() could not wait for the daemon to finish, and a following mount
    // would race the old one: fail loudly if the log line it comes from ever changes.
    if (daemon_pid_ <= 0) throw std::runtime_error("mounted, but the log names no daemon pid:\n" + log());
  }

  // fusermount3 where it is installed; otherwise umount (a machine without the fuse3 tools, where
  // the suites run as root, as on the GPU machine).
  static std::string unmount_command(bool lazy) {
    static const bool have_fusermount = run_shell("command -v fusermount3 >/dev/null 2>&1").status == 0;
    if (have_fusermount) return lazy ? "fusermount3 -u -z " : "fusermount3 -u ";
    return lazy ? "umount -l " : "umount ";
  }

  // Unmounts; never throws. Waits for the daemon to exit, so a following mount sees every write.
  void unmount() {
    if (!mounted_) return;
    mounted_ = false;
    bool done = false;
    for (int attempt = 0; attempt < 50 && !done; ++attempt) {
      done = !in_mount_table() || run_shell(unmount_command(false) + shell_quote(mountpoint_)).status == 0;
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!done) run_shell(unmount_command(true) + shell_quote(mountpoint_));
    if (daemon_pid_ > 0) {
      for (int i = 0; i < 200 && alive(daemon_pid_); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      if (alive(daemon_pid_)) {  // stuck: a test must never leave a daemon behind
        ::kill(daemon_pid_, SIGKILL);
        run_shell(unmount_command(true) + shell_quote(mountpoint_));
      }
    }
    daemon_pid_ = -1;
  }

  void remount() {
    unmount();
    mount();
  }

  // Runs a bash script inside the mount.
  CommandResult sh(const std::string& script) const { return run_shell(script, mountpoint_); }

  pid_t daemon_pid() const { return daemon_pid_; }

  // Whether the kernel still lists MOUNTPOINT as mounted (it may be gone already: the daemon was
  // killed or a test unmounted it).
  bool in_mount_table() const {
    std::istringstream in(read_file("/proc/self/mounts"));
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string dev, where;
      fields >> dev >> where;
      if (where == mountpoint_) return true;
    }
    return false;
  }

 private:
  // Running (a zombie waiting for init to reap it has finished all its work).
  static bool alive(pid_t pid) {
    std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
  }

  // The serving process writes "gpucryptfs[PID] info: mounted on MOUNTPOINT" to the log.
  pid_t pid_from_log() const {
    std::istringstream in(log());
    std::string line;
    pid_t pid = -1;
    const std::string tail = "mounted on " + mountpoint_;
    while (std::getline(in, line)) {
      if (line.size() < tail.size() || line.compare(line.size() - tail.size(), tail.size(), tail) != 0) continue;
      auto b = line.find("gpucryptfs[");
      auto e = line.find(']', b);
      if (b != std::string::npos && e != std::string::npos) pid = std::stoi(line.substr(b + 11, e - b - 11));
    }
    return pid;
  }

  VaultOptions opts_;
  TempDir root_;
  std::string cipherdir_, mountpoint_, passfile_, log_;
  bool mounted_ = false;
  pid_t daemon_pid_ = -1;
};

// How many descriptors the daemon holds right after mounting with the engine under test (a GPU
// context and its feeder threads hold many more than the cpu engine), measured once per test
// process by a probe mount.
inline int daemon_descriptors_after_start() {
  static const int count = [] {
    MountedVault probe;
    auto r = run_shell("ls /proc/" + std::to_string(probe.daemon_pid()) + "/fd | wc -l");
    const int n = r.status == 0 ? std::atoi(r.output.c_str()) : 0;
    if (n <= 0) throw std::runtime_error("cannot count the daemon's descriptors: " + r.output);
    return n;
  }();
  return count;
}

// The descriptor limit that leaves the daemon SPARE descriptors beyond what it holds after starting
// with the engine under test, so that tests that want small descriptor caches stay meaningful on
// every engine. What it holds is counted twice: while it starts, GPU contexts open and close many
// more than they keep, and with --transport uring the rings (one descriptor per CPU) are made after
// them (on two GPUs, a limit of what it holds plus 48 failed to make the rings now and then).
inline int low_descriptor_limit_value(int spare) { return 2 * daemon_descriptors_after_start() + spare; }
// The same as a shell prefix for the mount command.
inline std::string low_descriptor_limit(int spare) {
  return "ulimit -n " + std::to_string(low_descriptor_limit_value(spare)) + " && ";
}

}  // namespace gcfs::test
