// The power-cut harness (tests/powercut/README.md) for a test: PowercutDisk mounts powercut_fs on
// a temporary folder and sends it commands; PowercutVault is a directory vault whose CIPHERDIR
// lies on it, while its mountpoint, password file and daemon log stay on the ordinary disk (so
// that only the vault's own writes are counted and cut). Both always unmount in their destructors.
//
//   PowercutDisk disk;
//   PowercutVault v(disk);            // init, then `sync`: the new vault is on the disk for sure
//   ... write and fsync through v.path("f") ...
//   v.kill();                         // SIGKILL the daemon, unmount
//   disk.command("cut drop");         // the power goes: everything unsynced is lost
//   disk.command("boot");
//   v.mount();                        // recovery runs; what was fsynced must read back
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "support/mounted_vault.h"

#ifndef POWERCUT_FS_BIN
#error "POWERCUT_FS_BIN must name the powercut_fs binary"
#endif

namespace gcfs::test {

inline bool listed_in_mount_table(const std::string& dir) {
  std::istringstream in(read_file("/proc/self/mounts"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string dev, where;
    fields >> dev >> where;
    if (where == dir) return true;
  }
  return false;
}

// Running, not a zombie (a zombie has finished all its work).
inline bool process_alive(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

// Unmounts dir (lazily when it stays busy); never throws.
inline void unmount_dir(const std::string& dir) {
  for (int i = 0; i < 30 && listed_in_mount_table(dir); ++i) {
    if (run_shell(MountedVault::unmount_command(false) + shell_quote(dir)).status == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (listed_in_mount_table(dir)) run_shell(MountedVault::unmount_command(true) + shell_quote(dir));
}

class PowercutDisk {
 public:
  PowercutDisk() : root_("gcfs-powercut") {
    backing_ = root_.path() + "/backing";
    mnt_ = root_.path() + "/disk";
    ::mkdir(backing_.c_str(), 0700);
    ::mkdir(mnt_.c_str(), 0755);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl(POWERCUT_FS_BIN, POWERCUT_FS_BIN, backing_.c_str(), mnt_.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !listed_in_mount_table(mnt_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (!listed_in_mount_table(mnt_)) throw std::runtime_error("powercut_fs did not mount on " + mnt_);
  }
  PowercutDisk(const PowercutDisk&) = delete;
  ~PowercutDisk() {
    unmount_dir(mnt_);
    int st = 0;
    for (int i = 0; i < 200 && ::waitpid(pid_, &st, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (::waitpid(pid_, &st, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
    }
  }

  const std::string& mountpoint() const { return mnt_; }
  const std::string& backing() const { return backing_; }

  // Sends one command (tests/powercut/README.md, "Commands"); returns whether it was taken.
  bool command(const std::string& cmd) const {
    std::ofstream out(mnt_ + "/.powercut", std::ios::trunc);
    out << cmd << std::flush;
    return static_cast<bool>(out);
  }
  // "state=running writes=12 pending=40 armed=-"
  std::string status() const { return read_file(mnt_ + "/.powercut"); }
  std::uint64_t writes() const { return field("writes"); }
  bool dead() const { return status().find("state=dead") != std::string::npos; }

 private:
  std::uint64_t field(const std::string& name) const {
    const std::string s = status();
    const auto at = s.find(name + "=");
    return at == std::string::npos ? 0 : std::strtoull(s.c_str() + at + name.size() + 1, nullptr, 10);
  }

  TempDir root_;
  std::string backing_, mnt_;
  pid_t pid_ = -1;
};

// A directory vault with CIPHERDIR = DISK/cipher.
class PowercutVault {
 public:
  explicit PowercutVault(const PowercutDisk& disk, unsigned chunk_size = 4096) : local_("gcfs-pcvault") {
    cipherdir_ = disk.mountpoint() + "/cipher";
    mountpoint_ = local_.path() + "/plain";
    passfile_ = local_.path() + "/passfile";
    log_ = local_.path() + "/gpucryptfs.log";
    ::mkdir(cipherdir_.c_str(), 0700);
    ::mkdir(mountpoint_.c_str(), 0755);
    write_file(passfile_, "power cut password\n");
    ::chmod(passfile_.c_str(), 0600);
    std::string init = test_binary() + " init --quiet --scrypt-logn 10 --chunk-size " + std::to_string(chunk_size);
    if (test_format_asked()) init += " --format " + std::to_string(test_format_asked());
    const auto r = run_shell(init + " --passfile " + shell_quote(passfile_) + " " + shell_quote(cipherdir_));
    if (r.status != 0) throw std::runtime_error("gpucryptfs init failed: " + r.output);
    disk.command("sync");
  }
  PowercutVault(const PowercutVault&) = delete;
  ~PowercutVault() {
    if (::testing::Test::HasFailure())
      std::fprintf(stderr, "daemon log tail:\n%s", run_shell("tail -15 " + shell_quote(log_)).output.c_str());
    kill();
  }

  const std::string& cipherdir() const { return cipherdir_; }
  const std::string& mountpoint() const { return mountpoint_; }
  std::string path(const std::string& rel) const { return mountpoint_ + "/" + rel; }
  std::string log() const { return read_file(log_); }

  // Mounts (recovery runs first); the command's result, so a test may expect a failure.
  CommandResult mount(const std::string& extra = "") {
    const std::string cmd = test_binary() + " mount --passfile " + shell_quote(passfile_) + " --engine " +
                            test_engine() + transport_arg() + " --log " + shell_quote(log_) + " " + extra + " " +
                            shell_quote(cipherdir_) + " " + shell_quote(mountpoint_);
    CommandResult r = run_shell(cmd);
    if (r.status == 0) pid_ = pid_from_log();
    return r;
  }
  // Unmounts cleanly and waits for the daemon.
  void unmount() {
    unmount_dir(mountpoint_);
    wait_for_daemon();
  }
  // The crash: SIGKILL the daemon, then unmount what is left (lazily if it stays busy).
  void kill() {
    if (pid_ > 0 && process_alive(pid_)) ::kill(pid_, SIGKILL);
    wait_for_daemon();
    unmount_dir(mountpoint_);
  }
  CommandResult fsck() const {
    return run_shell(test_binary() + " fsck --passfile " + shell_quote(passfile_) + " " + shell_quote(cipherdir_));
  }

 private:
  void wait_for_daemon() {
    for (int i = 0; i < 400 && pid_ > 0 && process_alive(pid_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (pid_ > 0 && process_alive(pid_)) ::kill(pid_, SIGKILL);
    pid_ = -1;
  }
  // The serving process writes "gpucryptfs[PID] info: mounted on MOUNTPOINT" to the log.
  pid_t pid_from_log() const {
    std::istringstream in(log());
    pid_t pid = -1;
    const std::string tail = "mounted on " + mountpoint_;
    for (std::string line; std::getline(in, line);) {
      if (line.size() < tail.size() || line.compare(line.size() - tail.size(), tail.size(), tail) != 0) continue;
      const auto b = line.find("gpucryptfs["), e = line.find(']', b);
      if (b != std::string::npos && e != std::string::npos) pid = std::stoi(line.substr(b + 11, e - b - 11));
    }
    return pid;
  }

  TempDir local_;
  std::string cipherdir_, mountpoint_, passfile_, log_;
  pid_t pid_ = -1;
};

}  // namespace gcfs::test
