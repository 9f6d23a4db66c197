// A root daemon unmounts the mount it made, wherever it is by then, and nothing else; it mounts on
// the directory it checked, never where a path changed in between leads.
//
// A user who owns a folder above a mountpoint can rename that folder and put a symbolic link to
// somewhere else in its place. The daemon once unmounted by the path (umount2's UMOUNT_NOFOLLOW
// guards only the last name) and mounted with mount(2) on the path, so it reached wherever the link
// led: another filesystem was unmounted while the vault stayed mounted. Here the other filesystem
// is a tmpfs the test mounts; every test unmounts all it mounted below its folder, also on
// failure, before that folder is removed.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::string q(const std::string& s) { return shell_quote(s); }

std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

// The mountpoints listed in /proc/self/mountinfo (none of this test's paths need unescaping).
std::vector<std::string> mountpoints() {
  std::vector<std::string> out;
  std::istringstream in(read_file("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    if (f >> id >> parent >> dev >> root >> point) out.push_back(point);
  }
  return out;
}

bool mounted_at(const std::string& path) {
  for (const auto& p : mountpoints())
    if (p == path) return true;
  return false;
}

// Whether the process has ended (a zombie waiting for its parent counts: its work is done).
bool running(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

bool ends_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (running(pid) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return !running(pid);
}

// The last line of defence, declared right after the test's folder: unmounts whatever is still
// mounted below it (the newest first), so that removing the folder never reaches into a mount.
class UnmountAllBelow {
 public:
  explicit UnmountAllBelow(std::string dir) : dir_(std::move(dir)) {}
  ~UnmountAllBelow() {
    for (int round = 0; round < 50; ++round) {
      std::vector<std::string> left;
      for (const auto& p : mountpoints())
        if (p.starts_with(dir_ + "/")) left.push_back(p);
      if (left.empty()) return;
      for (auto it = left.rbegin(); it != left.rend(); ++it)
        run_shell("umount " + q(*it) + " 2>/dev/null || { [ " + std::to_string(round) + " -ge 40 ] && umount -l " + q(*it) + "; }");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

 private:
  std::string dir_;
};

// Someone else's filesystem: a tmpfs on dir, with a file in it.
class OtherFilesystem {
 public:
  explicit OtherFilesystem(std::string dir) : dir_(std::move(dir)) {
    const auto r = run_shell("mkdir -p " + q(dir_) + " && mount -t tmpfs gcfs-other " + q(dir_) + " && echo theirs > " +
                             q(dir_ + "/file"));
    if (r.status != 0) throw std::runtime_error("cannot mount a tmpfs: " + r.output);
  }
  ~OtherFilesystem() {
    if (mounted_at(dir_)) run_shell("umount " + q(dir_) + " || umount -l " + q(dir_));
  }
  bool intact() const { return mounted_at(dir_) && read_file(dir_ + "/file") == "theirs\n"; }

 private:
  std::string dir_;
};

// What the attacker does: dir renamed to dir.moved, and a symbolic link to target where it was.
// Undone on the way out, so that the vault's own teardown finds its paths again.
class SwappedForLink {
 public:
  SwappedForLink(std::string dir, const std::string& target) : dir_(std::move(dir)) {
    if (::rename(dir_.c_str(), moved().c_str()) != 0 || ::symlink(target.c_str(), dir_.c_str()) != 0)
      throw std::runtime_error("cannot swap " + dir_ + " for a symbolic link");
  }
  ~SwappedForLink() {
    struct stat st {};
    if (::lstat(dir_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) ::unlink(dir_.c_str());
    ::rename(moved().c_str(), dir_.c_str());
  }
  std::string moved() const { return dir_ + ".moved"; }

 private:
  std::string dir_;
};

class UnmountIdentity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the hazard is a root daemon's, and the other filesystem needs root to mount";
  }
  VaultOptions in_scratch(std::vector<std::string> extra = {}, bool mount = true) const {
    VaultOptions o;
    o.parent_dir = scratch_.path();
    o.mount_args.insert(o.mount_args.end(), extra.begin(), extra.end());
    o.mount = mount;
    return o;
  }
  TempDir scratch_{"gcfs-unmount-identity"};
  UnmountAllBelow guard_{scratch_.path()};
};

TEST_F(UnmountIdentity, IdleUnmountsTheVaultWhereItWasMovedAndLeavesWhatThePathLeadsTo) {
  OtherFilesystem other(scratch_.path() + "/other/plain");
  MountedVault v(in_scratch({"--idle", "1s"}));
  write_file(v.path("f"), "x");
  const pid_t daemon = v.daemon_pid();
  const std::string dir = parent_of(v.mountpoint());
  // An open file keeps the mount from going idle while the folder is swapped; closing it starts
  // the idle time.
  const int fd = ::open(v.path("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  SwappedForLink swap(dir, scratch_.path() + "/other");
  ASSERT_TRUE(mounted_at(swap.moved() + "/plain"));
  ::close(fd);

  EXPECT_TRUE(ends_within(daemon, std::chrono::seconds(20))) << "the daemon still runs 20 s after --idle 1s";
  EXPECT_TRUE(other.intact()) << "the filesystem that the old path leads to now was unmounted";
  EXPECT_FALSE(mounted_at(swap.moved() + "/plain")) << "the vault stays mounted where it was moved";
  const std::string log = read_file(swap.moved() + "/gpucryptfs.log");
  EXPECT_NE(log.find("unmounted the mount where it had moved: " + swap.moved() + "/plain"), std::string::npos) << log;
}

TEST_F(UnmountIdentity, SigtermUnmountsTheVaultWhereItWasMovedAndLeavesWhatThePathLeadsTo) {
  OtherFilesystem other(scratch_.path() + "/other/plain");
  MountedVault v(in_scratch());
  write_file(v.path("f"), "x");
  const pid_t daemon = v.daemon_pid();
  SwappedForLink swap(parent_of(v.mountpoint()), scratch_.path() + "/other");
  ASSERT_EQ(::kill(daemon, SIGTERM), 0);

  EXPECT_TRUE(ends_within(daemon, std::chrono::seconds(20))) << "the daemon still runs 20 s after SIGTERM";
  EXPECT_TRUE(other.intact()) << "the filesystem that the old path leads to now was unmounted";
  EXPECT_FALSE(mounted_at(swap.moved() + "/plain")) << "the vault stays mounted where it was moved";
  const std::string log = read_file(swap.moved() + "/gpucryptfs.log");
  EXPECT_NE(log.find("unmounted the mount where it had moved: " + swap.moved() + "/plain"), std::string::npos) << log;
}

// SIGTERM while a process works inside: the vault is detached (it must end), the other
// filesystem is untouched, and the vault's data is whole on the next mount.
TEST_F(UnmountIdentity, SigtermOnABusyMovedVaultDetachesItAndOnlyIt) {
  OtherFilesystem other(scratch_.path() + "/other/plain");
  MountedVault v(in_scratch());
  write_file(v.path("f"), "kept");
  const pid_t daemon = v.daemon_pid();
  const int busy = ::open(v.mountpoint().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(busy, 0);
  {
    SwappedForLink swap(parent_of(v.mountpoint()), scratch_.path() + "/other");
    ASSERT_EQ(::kill(daemon, SIGTERM), 0);
    EXPECT_TRUE(ends_within(daemon, std::chrono::seconds(20))) << "the daemon still runs 20 s after SIGTERM";
    EXPECT_TRUE(other.intact()) << "the filesystem that the old path leads to now was detached";
    EXPECT_FALSE(mounted_at(swap.moved() + "/plain"));
    const std::string log = read_file(swap.moved() + "/gpucryptfs.log");
    EXPECT_NE(log.find("the mount is busy"), std::string::npos) << log;
  }
  ::close(busy);
  v.remount();
  EXPECT_EQ(read_file(v.path("f")), "kept");
}

// The mountpoint is checked, then a password is asked for (here: --extpass, which swaps a folder
// above the mountpoint for a link elsewhere, as another user could meanwhile), then the mount is
// made. It is refused (exit status 10), never made where the link leads.
TEST_F(UnmountIdentity, AMountpointWhosePathGainsASymlinkBeforeTheMountIsRefused) {
  MountedVault v(in_scratch({}, false));
  const std::string dir = scratch_.path() + "/top/d", elsewhere = scratch_.path() + "/elsewhere";
  ASSERT_EQ(run_shell("mkdir -p " + q(dir + "/plain") + " " + q(elsewhere + "/plain")).status, 0);
  const std::string swap = "mv " + q(dir) + " " + q(dir + ".moved") + " && ln -s " + q(elsewhere) + " " + q(dir) +
                           " && cat " + q(v.passfile());
  const CommandResult r = run_shell(test_binary() + " mount --extpass " + q(swap) + " --engine " + test_engine() +
                                    transport_arg() + " --log " + q(v.log_path()) + " " + q(v.cipherdir()) + " " +
                                    q(dir + "/plain"));
  EXPECT_FALSE(mounted_at(elsewhere + "/plain")) << "mounted where the link leads: " << r.output;
  EXPECT_FALSE(mounted_at(dir + ".moved/plain")) << r.output;
  EXPECT_EQ(r.status, 10) << r.output;
  EXPECT_NE(r.output.find("a symbolic link is in its path now"), std::string::npos) << r.output;
}

// Unmounted from outside (fusermount3 -u), the daemon has nothing left to unmount: its mount's
// ID is free at once and the next mount takes it (IDs are reused, lowest first). The daemon once
// went on to unmount "its" mount ID at teardown and found the new mount under it; it must never
// look, never touch that mount, and log nothing about it.
TEST_F(UnmountIdentity, AnUnmountFromOutsideLeavesTheMountThatTakesTheFreedIdAlone) {
  MountedVault v(in_scratch());
  write_file(v.path("f"), "x");
  const pid_t daemon = v.daemon_pid();
  const std::string other = scratch_.path() + "/other";
  ASSERT_EQ(::mkdir(other.c_str(), 0755), 0);
  // Unmount and mount the other filesystem at once, before the daemon's teardown gets there.
  const CommandResult r = run_shell(MountedVault::unmount_command(false) + q(v.mountpoint()) +
                                    " && mount -t tmpfs gcfs-other " + q(other) + " && echo theirs > " + q(other + "/file"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(ends_within(daemon, std::chrono::seconds(20)));
  EXPECT_TRUE(mounted_at(other)) << "the daemon unmounted the mount that took its mount's ID";
  EXPECT_EQ(read_file(other + "/file"), "theirs\n");
  const std::string log = v.log();
  EXPECT_EQ(log.find("not unmounting"), std::string::npos) << log;
  EXPECT_EQ(log.find("warning"), std::string::npos) << log;
  run_shell("umount " + q(other));
}

// A symbolic link in the path as given (/home -> /data/home) is resolved when the command starts:
// the mount is made on the directory it leads to then, as before.
TEST_F(UnmountIdentity, AMountpointGivenThroughASymlinkMountsOnTheDirectoryItLeadsTo) {
  MountedVault v(in_scratch({}, false));
  const std::string real = scratch_.path() + "/real", link = scratch_.path() + "/link";
  ASSERT_EQ(run_shell("mkdir -p " + q(real + "/plain") + " && ln -s " + q(real) + " " + q(link)).status, 0);
  const CommandResult r = run_shell(test_binary() + " mount --passfile " + q(v.passfile()) + " --engine " +
                                    test_engine() + transport_arg() + " --log " + q(v.log_path()) + " " +
                                    q(v.cipherdir()) + " " + q(link + "/plain"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(mounted_at(real + "/plain"));
  write_file(link + "/plain/f", "through the link");
  EXPECT_EQ(read_file(real + "/plain/f"), "through the link");
  EXPECT_EQ(run_shell(MountedVault::unmount_command(false) + q(real + "/plain")).status, 0);
}

}  // namespace
}  // namespace gcfs::test
