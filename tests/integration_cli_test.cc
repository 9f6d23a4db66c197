// The CLI's promises: the documented exit codes and one-line messages for each way a mount or an
// init can go wrong, passwd, info, --help, read-only mounts.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

VaultOptions not_mounted() {
  VaultOptions o;
  o.mount = false;
  return o;
}

std::string bin() { return test_binary(); }

TEST(Cli, UnknownCommandIsOneLineWithAPointerToHelp) {
  auto r = run_shell(bin() + " mountt /a /b");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(run_shell("grep -c . <<< " + shell_quote(r.output)).output, "1\n") << "one line: " << r.output;
  EXPECT_NE(r.output.find("unknown command 'mountt'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--help"), std::string::npos) << r.output;
}

TEST(Cli, MountErrorsHaveTheirExitCodes) {
  MountedVault v(not_mounted());
  TempDir t("gcfs-cli");
  const std::string q_cipher = shell_quote(v.cipherdir()), q_mp = shell_quote(v.mountpoint());
  write_file(t.path() + "/wrong", "not the password\n");
  auto r = run_shell(bin() + " mount --engine cpu --passfile " + shell_quote(t.path() + "/wrong") + " " + q_cipher + " " + q_mp);
  EXPECT_EQ(r.status, 12) << r.output;
  EXPECT_NE(r.output.find("wrong password"), std::string::npos) << r.output;
  r = run_shell(bin() + " mount --passfile " + shell_quote(v.passfile()) + " " + shell_quote(t.path()) + " " + q_mp);
  EXPECT_EQ(r.status, 23) << r.output;
  EXPECT_NE(r.output.find("not a gpucryptfs vault"), std::string::npos) << r.output;
  r = run_shell(bin() + " mount --passfile " + shell_quote(v.passfile()) + " " + q_cipher + " " +
                shell_quote(t.path() + "/missing"));
  EXPECT_EQ(r.status, 10) << r.output;
  write_file(t.path() + "/occupant", "x");
  r = run_shell(bin() + " mount --passfile " + shell_quote(v.passfile()) + " " + q_cipher + " " + shell_quote(t.path()));
  EXPECT_EQ(r.status, 10) << r.output;
  EXPECT_NE(r.output.find("not empty"), std::string::npos) << r.output;
  r = run_shell(bin() + " mount --no-such-option " + q_cipher + " " + q_mp);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(run_shell("grep -c . <<< " + shell_quote(r.output)).output, "1\n") << "one line: " << r.output;
  // --gpus: a malformed list is a usage error that says what it wants; nothing gets mounted.
  for (const char* bad : {"x", "0,,1", "1,1", "-1"}) {
    r = run_shell(bin() + " mount --engine gpu --gpus " + shell_quote(bad) + " --passfile " + shell_quote(v.passfile()) +
                  " " + q_cipher + " " + q_mp);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("gpucryptfs info"), std::string::npos) << bad << ": " << r.output;
  }
  r = run_shell(bin() + " mount --gpu-streams 0 --passfile " + shell_quote(v.passfile()) + " " + q_cipher + " " + q_mp);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--gpu-streams must be"), std::string::npos) << r.output;
  // A GPU number that does not exist (there is no GPU 999) is refused with the GPU problem named.
  r = run_shell(bin() + " mount --engine gpu --gpus 999 --passfile " + shell_quote(v.passfile()) + " " + q_cipher + " " + q_mp);
  EXPECT_NE(r.status, 0) << r.output;
  // "GPU 999 does not exist" where there are GPUs; where there are none, or in a build without
  // CUDA, "the gpu engine cannot run: <why>" or "the gpu engine is not available: <why>"
  EXPECT_TRUE(r.output.find("GPU 999") != std::string::npos || r.output.find("the gpu engine ") != std::string::npos)
      << r.output;
  EXPECT_FALSE(v.in_mount_table());
}

// `mount` returns once the mount answers, and nothing the daemon does afterwards keeps it busy:
// a script may use it and unmount at once. (The daemon's read-ahead setup used to stat the
// mountpoint from its own thread, which held the mount busy: "Device or resource busy".)
TEST(Cli, UnmountRightAfterMountSucceeds) {
  MountedVault v(not_mounted());
  const std::string q_mp = shell_quote(v.mountpoint());
  // Logged to the file the failure output shows: what the daemon of the round before was doing
  // when the next mount found the vault taken.
  const std::string mount = bin() + " mount --engine " + test_engine() + transport_arg() + " --passfile " + shell_quote(v.passfile()) +
                            " --log " + shell_quote(v.log_path()) + " " + shell_quote(v.cipherdir()) + " " + q_mp;
  const std::string unmount = MountedVault::unmount_command(false) + q_mp;
  for (int i = 0; i < 3; ++i) {
    auto r = run_shell(mount + " && " + unmount);
    EXPECT_EQ(r.status, 0) << "round " << i << ": " << r.output;
    if (v.in_mount_table()) run_shell("umount -l " + q_mp);
  }
  // And a program may use it at once: the first request does not wait for the daemon to start.
  auto r = run_shell(mount + " && echo hello > " + shell_quote(v.path("f")) + " && cat " + shell_quote(v.path("f")) +
                     " && " + unmount);
  EXPECT_EQ(r.status, 0) << r.output;
  // The output ends with the file's content (the mount may first say where it logs).
  ASSERT_GE(r.output.size(), 6u) << r.output;
  EXPECT_EQ(r.output.substr(r.output.size() - 6), "hello\n") << r.output;
  EXPECT_FALSE(v.in_mount_table());
}

TEST(Cli, DetachedMountWithoutSyslogLogsToTheStateDirectoryAndSaysSo) {
  // Where a syslog daemon may listen, the log goes there as before; this case is the other one.
  if (run_shell("test -S /dev/log").status == 0) GTEST_SKIP() << "/dev/log is a socket here: syslog may be listening";
  MountedVault v(not_mounted());
  TempDir home("gcfs-home");
  const std::string q_mp = shell_quote(v.mountpoint());
  auto r = run_shell("env -u XDG_STATE_HOME HOME=" + shell_quote(home.path()) + " " + bin() + " mount --engine " +
                     test_engine() + transport_arg() + " --passfile " + shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()) + " " +
                     q_mp + " && echo x > " + shell_quote(v.path("f")) + " && " + MountedVault::unmount_command(false) +
                     q_mp);
  EXPECT_EQ(r.status, 0) << r.output;
  const std::string log_file = home.path() + "/.local/state/gpucryptfs/gpucryptfs.log";
  EXPECT_NE(r.output.find("logs to " + log_file), std::string::npos) << r.output;
  EXPECT_NE(read_file(log_file).find("mounted on"), std::string::npos) << read_file(log_file);
  struct stat st {};
  ASSERT_EQ(::stat((home.path() + "/.local/state/gpucryptfs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  if (v.in_mount_table()) run_shell("umount -l " + q_mp);
}

// The log a root daemon appends to may sit where a user has a say: it is made 0600 whatever the
// umask the daemon runs with, and a symlink, a FIFO or a second hard link in its place is refused
// with the reason before anything is written through it.
TEST(Cli, TheLogFileIsTheOwnersAloneAndNeverFollowed) {
  MountedVault v(not_mounted());
  TempDir t("gcfs-log");
  const std::string mount = bin() + " mount --engine " + test_engine() + transport_arg() + " --passfile " +
                            shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint());
  const std::string log = t.path() + "/new.log";
  auto r = run_shell("umask 0; " + mount + " --log " + shell_quote(log));
  ASSERT_EQ(r.status, 0) << r.output;
  run_shell(MountedVault::unmount_command(false) + shell_quote(v.mountpoint()));
  struct stat st {};
  ASSERT_EQ(::stat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "made under umask 0";
  EXPECT_NE(read_file(log).find("mounted on"), std::string::npos);
  // A symlink to a file elsewhere: refused, and the file is left as it was.
  const std::string victim = t.path() + "/victim";
  write_file(victim, "untouched\n");
  ASSERT_EQ(::symlink(victim.c_str(), (t.path() + "/link.log").c_str()), 0);
  r = run_shell(mount + " --log " + shell_quote(t.path() + "/link.log"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("symbolic link"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(victim), "untouched\n");
  EXPECT_FALSE(v.in_mount_table());
  // A second name of that file: refused too.
  ASSERT_EQ(::link(victim.c_str(), (t.path() + "/hard.log").c_str()), 0);
  r = run_shell(mount + " --log " + shell_quote(t.path() + "/hard.log"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("hard links"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(victim), "untouched\n");
  // A FIFO: refused at once, never waited on.
  ASSERT_EQ(::mkfifo((t.path() + "/fifo.log").c_str(), 0600), 0);
  r = run_shell("timeout 20 " + mount + " --log " + shell_quote(t.path() + "/fifo.log"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "the mount waited on the FIFO";
  EXPECT_NE(r.output.find("not a regular file"), std::string::npos) << r.output;
  EXPECT_FALSE(v.in_mount_table());
  // A character device is taken as it is: a log thrown away.
  r = run_shell(mount + " --log /dev/null && " + MountedVault::unmount_command(false) + shell_quote(v.mountpoint()));
  EXPECT_EQ(r.status, 0) << r.output;
  if (v.in_mount_table()) run_shell("umount -l " + shell_quote(v.mountpoint()));
}

// A password file its group or everyone can read is said to be one, as ssh says of a key: on the
// terminal, and in the daemon's log, which is opened after the password was read. An owner-only
// file says nothing.
TEST(Cli, APasswordFileOthersCanReadIsWarnedOfOnTheTerminalAndInTheLog) {
  MountedVault v(not_mounted());
  const std::string mount = bin() + " mount --engine " + test_engine() + transport_arg() + " --passfile " +
                            shell_quote(v.passfile()) + " --log " + shell_quote(v.log_path()) + " " +
                            shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint());
  const std::string unmount = MountedVault::unmount_command(false) + shell_quote(v.mountpoint());
  auto r = run_shell(mount + " && " + unmount);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("can be read by"), std::string::npos) << r.output;
  EXPECT_EQ(v.log().find("can be read by"), std::string::npos) << v.log();
  ASSERT_EQ(::chmod(v.passfile().c_str(), 0644), 0);
  r = run_shell(mount + " && " + unmount);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string said = "the password file " + v.passfile() + " can be read by every user (mode 0644)";
  EXPECT_NE(r.output.find(said), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chmod 600"), std::string::npos) << r.output;
  EXPECT_NE(v.log().find(said), std::string::npos) << v.log();
  ASSERT_EQ(::chmod(v.passfile().c_str(), 0640), 0);
  r = run_shell(bin() + " info " + shell_quote(v.cipherdir()) + " >/dev/null; " + bin() + " passwd --passfile " +
                shell_quote(v.passfile()) + " --new-passfile " + shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("can be read by its group (mode 0640)"), std::string::npos) << r.output;
  EXPECT_FALSE(v.in_mount_table());
}

TEST(Cli, CorruptConfigIsRefused) {
  MountedVault v(not_mounted());
  const std::string conf = v.cipherdir() + "/gpucryptfs.conf";
  ::chmod(conf.c_str(), 0600);
  write_file(conf, "{ this is not json");
  auto r = run_shell(bin() + " mount --passfile " + shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()) + " " +
                     shell_quote(v.mountpoint()));
  EXPECT_EQ(r.status, 23) << r.output;
  r = run_shell(bin() + " info " + shell_quote(v.cipherdir()));
  EXPECT_EQ(r.status, 23) << r.output;
}

TEST(Cli, InitRefusesANonEmptyDirectoryAndBadChunkSizes) {
  TempDir t("gcfs-cli");
  write_file(t.path() + "/pw", "pw\n");
  write_file(t.path() + "/junk", "x");
  auto r = run_shell(bin() + " init --scrypt-logn 10 --passfile " + shell_quote(t.path() + "/pw") + " " + shell_quote(t.path()));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("not empty"), std::string::npos) << r.output;
  r = run_shell("mkdir " + shell_quote(t.path() + "/v") + " && " + bin() + " init --chunk-size 5000 --passfile " +
                shell_quote(t.path() + "/pw") + " " + shell_quote(t.path() + "/v"));
  EXPECT_EQ(r.status, 2) << r.output;
}

TEST(Cli, PasswdThenMountWithTheNewPassword) {
  MountedVault v;
  write_file(v.path("kept"), "still here");
  v.unmount();
  TempDir t("gcfs-cli");
  write_file(t.path() + "/new", "a new password\n");
  auto r = run_shell(bin() + " passwd --passfile " + shell_quote(v.passfile()) + " --new-passfile " +
                     shell_quote(t.path() + "/new") + " " + shell_quote(v.cipherdir()));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_shell(bin() + " mount --engine cpu --passfile " + shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()) +
                " " + shell_quote(v.mountpoint()));
  EXPECT_EQ(r.status, 12) << "the old password must stop working: " << r.output;
  write_file(v.passfile(), "a new password\n");
  v.mount();
  EXPECT_EQ(read_file(v.path("kept")), "still here");
}

// passwd wraps the same master key again: it says so, and an old copy of the config (a backup,
// sync history) still opens the vault with the old password (docs/SECURITY.md, "Changing the
// password"). This test pins that documented limit: should a re-key ever change it, update both.
TEST(Cli, PasswdWarnsThatAnOldConfigCopyStillOpensWithTheOldPassword) {
  MountedVault v(not_mounted());
  TempDir t("gcfs-cli");
  const std::string config = v.cipherdir() + "/gpucryptfs.conf";
  ASSERT_EQ(run_shell("cp " + shell_quote(config) + " " + shell_quote(t.path() + "/old.conf")).status, 0);
  write_file(t.path() + "/new", "a new password\n");
  auto r = run_shell(bin() + " passwd --passfile " + shell_quote(v.passfile()) + " --new-passfile " +
                     shell_quote(t.path() + "/new") + " " + shell_quote(v.cipherdir()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("old gpucryptfs.conf"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("still open"), std::string::npos) << r.output;
  const std::string fsck_old = bin() + " fsck --passfile " + shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir());
  EXPECT_EQ(run_shell(fsck_old).status, 12) << "the current config refuses the old password";
  ASSERT_EQ(run_shell("cp " + shell_quote(t.path() + "/old.conf") + " " + shell_quote(config)).status, 0);
  r = run_shell(fsck_old);
  EXPECT_EQ(r.status, 0) << "the old config and the old password still open the vault: " << r.output;
}

TEST(Cli, InfoAndHelp) {
  MountedVault v(not_mounted());
  auto r = run_shell(bin() + " info " + shell_quote(v.cipherdir()));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("chunk size 4096"), std::string::npos) << r.output;  // the default of init
  // The format: init's default (kInitDefaultFormat, what the suites assume), or the one asked for.
  EXPECT_NE(r.output.find("gpucryptfs version " + std::to_string(test_format())), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GPU"), std::string::npos) << r.output;
  for (const char* c : {"init", "mount", "passwd", "info"}) {
    r = run_shell(bin() + " " + c + " --help");
    EXPECT_EQ(r.status, 0) << c;
    EXPECT_NE(r.output.find("usage: gpucryptfs"), std::string::npos) << c;
  }
}

TEST(Cli, ReadOnlyMountRefusesWrites) {
  VaultOptions o;
  o.mount_args.push_back("--read-only");
  MountedVault v(o);
  int fd = ::open(v.path("new").c_str(), O_CREAT | O_WRONLY, 0644);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, EROFS);
}

TEST(Cli, AllowOtherLetsAnotherUserWorkAndOwnTheirFiles) {
  VaultOptions o;
  o.mount_args.push_back("--allow-other");
  MountedVault v(o);
  // The fixture's temporary folder is private to root; let the other user reach the mountpoint.
  ASSERT_EQ(run_shell("chmod 755 \"$(dirname " + shell_quote(v.mountpoint()) + ")\" " + shell_quote(v.mountpoint())).status, 0);
  ASSERT_EQ(::mkdir(v.path("shared").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(v.path("shared").c_str(), 0777), 0);
  auto r = run_shell("setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo mine > " + v.path("shared/f") +
                     " && cat " + v.path("shared/f") + "' && stat -c '%u:%g' " + shell_quote(v.path("shared/f")) +
                     " && setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo x > " + v.path("denied") +
                     "' 2>/dev/null || echo denied");
  EXPECT_EQ(r.output, "mine\n65534:65534\ndenied\n") << "kernel permission checks must apply too";
}

TEST(Cli, SigtermUnmounts) {
  MountedVault v;
  write_file(v.path("f"), "x");
  ASSERT_GT(v.daemon_pid(), 0);
  ASSERT_EQ(::kill(v.daemon_pid(), SIGTERM), 0);
  auto r = run_shell("for i in $(seq 1 100); do mountpoint -q " + shell_quote(v.mountpoint()) +
                     " || { echo gone; exit 0; }; sleep 0.05; done; echo still-mounted");
  EXPECT_EQ(r.output, "gone\n");
  // The daemon itself ends too: every request worker, also those that were idle waiting for a
  // request when the signal reached another thread, leaves its loop.
  // (Up to 30 s: a sanitized daemon on a loaded machine takes a few seconds to tear down.)
  auto exited = run_shell("for i in $(seq 1 300); do [ -e /proc/" + std::to_string(v.daemon_pid()) +
                          " ] || { echo exited; exit 0; }; grep -q '^State:.*Z' /proc/" +
                          std::to_string(v.daemon_pid()) + "/status && { echo exited; exit 0; }; sleep 0.1; done; "
                          "echo still-running");
  EXPECT_EQ(exited.output, "exited\n");
  v.remount();
  EXPECT_EQ(read_file(v.path("f")), "x");
}

TEST(Cli, ForegroundMountServesUntilUnmounted) {
  MountedVault v(not_mounted());
  auto r = run_shell("(" + bin() + " mount -f --engine cpu --passfile " + shell_quote(v.passfile()) + " " +
                     shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint()) + " > " +
                     shell_quote(v.cipherdir() + "/../fg.log") + " 2>&1 &) ; for i in $(seq 1 100); do "
                     "mountpoint -q " + shell_quote(v.mountpoint()) + " && break; sleep 0.1; done; "
                     "echo fg > " + shell_quote(v.path("f")) + " && cat " + shell_quote(v.path("f")) +
                     " && { fusermount3 -u " + shell_quote(v.mountpoint()) + " 2>/dev/null || umount " +
                     shell_quote(v.mountpoint()) + "; }");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "fg\n");
}

}  // namespace
}  // namespace gcfs::test
