// renameat2(RENAME_WHITEOUT) and overlayfs with a gpucryptfs upper layer (issue 19, item 5).
// On ext4 on the development machine the overlay script below gives the same results, and the
// upper layer has O_TMPFILE there as here: overlayfs copies files up through an unnamed file in
// its work directory that a link then names (docs/POSIX.md).
#include <fcntl.h>
#include <stdio.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::string describe(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISCHR(st.st_mode)) return "char " + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
  if (S_ISREG(st.st_mode)) return "file " + read_file(path);
  return "other";
}

TEST(PosixOverlay, RenameWhiteoutLeavesACharDeviceZeroZeroAtTheSource) {
  if (::geteuid() != 0) GTEST_SKIP() << "a whiteout is a device node: the daemon needs CAP_MKNOD";
  MountedVault v;
  const std::string long_name(200, 'w');  // a long name keeps its .name file for the whiteout
  for (const std::string& name : {std::string("short"), long_name}) {
    write_file(v.path(name), "moved");
    ASSERT_EQ(::renameat2(AT_FDCWD, v.path(name).c_str(), AT_FDCWD, v.path(name + ".new").c_str(), RENAME_WHITEOUT), 0)
        << std::strerror(errno);
    EXPECT_EQ(describe(v.path(name)), "char 0:0");
    EXPECT_EQ(describe(v.path(name + ".new")), "file moved");
  }
  // Onto an existing target, and with RENAME_NOREPLACE refusing one.
  write_file(v.path("a"), "A");
  write_file(v.path("b"), "B");
  ASSERT_EQ(::renameat2(AT_FDCWD, v.path("a").c_str(), AT_FDCWD, v.path("b").c_str(), RENAME_WHITEOUT), 0);
  EXPECT_EQ(describe(v.path("a")), "char 0:0");
  EXPECT_EQ(describe(v.path("b")), "file A");
  write_file(v.path("c"), "C");
  EXPECT_EQ(::renameat2(AT_FDCWD, v.path("c").c_str(), AT_FDCWD, v.path("b").c_str(), RENAME_WHITEOUT | RENAME_NOREPLACE), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(::renameat2(AT_FDCWD, v.path("c").c_str(), AT_FDCWD, v.path("b").c_str(), RENAME_WHITEOUT | RENAME_EXCHANGE), -1);
  EXPECT_EQ(errno, EINVAL);
  v.remount();
  EXPECT_EQ(describe(v.path(long_name)), "char 0:0");
  EXPECT_EQ(describe(v.path(long_name + ".new")), "file moved");
  EXPECT_EQ(describe(v.path("a")), "char 0:0");
}

// A whiteout made by an ordinary user is his, as ext4 makes it: made by the root daemon it was
// root's, and in a sticky directory its maker could then not remove it again.
TEST(PosixOverlay, AWhiteoutIsTheCallersWhoCanRemoveItFromAStickyDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the mount is served to another user";
  VaultOptions o;
  o.mount_args.push_back("--allow-other");
  MountedVault v(o);
  const std::string top = v.mountpoint().substr(0, v.mountpoint().rfind('/'));
  ASSERT_EQ(::chmod(top.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(v.mountpoint().c_str(), 0755), 0);
  const std::string sticky = v.path("sticky");
  ASSERT_EQ(::mkdir(sticky.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  const std::string from = sticky + "/f", to = sticky + "/g";
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(10);
    const int fd = ::open(from.c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
    if (fd < 0) ::_exit(11);
    ::close(fd);
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_WHITEOUT) != 0) ::_exit(12);
    struct stat st {};
    if (::lstat(from.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) ::_exit(13);
    if (st.st_uid != 65534) ::_exit(14);
    if (::unlink(from.c_str()) != 0) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: no setuid; 11: create; 12: renameat2; 13: no whiteout; 14: the whiteout "
                                       "is not the caller's; 15: its maker cannot remove it";
  struct stat st {};
  EXPECT_NE(::lstat(from.c_str(), &st), 0) << "the whiteout is still there";
  EXPECT_EQ(describe(to), "file ");
}

TEST(PosixOverlay, OverlayfsUsesAGpucryptfsUpperLayer) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting overlayfs needs root";
  if (run_shell("grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null; grep -qw overlay /proc/filesystems")
          .status != 0)
    GTEST_SKIP() << "this kernel has no overlayfs";
  MountedVault v;
  TempDir lower("gcfs-ovl-lower"), merged("gcfs-ovl-merged");
  ASSERT_EQ(run_shell("mkdir -p dir && echo lower-a > a && echo lower-b > b && echo lower-c > dir/c", lower.path()).status, 0);
  ASSERT_EQ(::mkdir(v.path("upper").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(v.path("work").c_str(), 0755), 0);
  // What overlayfs says about its upper layer while mounting goes to the kernel log (read where
  // this user may: only the lines that came with this mount).
  const bool kernel_log = run_shell("dmesg >/dev/null 2>&1").status == 0;
  const std::string log_lines = kernel_log ? run_shell("dmesg | wc -l").output : "0\n";
  auto m = run_shell("mount -t overlay overlay -o lowerdir=" + lower.path() + ",upperdir=" + v.path("upper") +
                     ",workdir=" + v.path("work") + " " + shell_quote(merged.path()));
  ASSERT_EQ(m.status, 0) << m.output << run_shell("dmesg | grep -i overlay | tail -5").output;
  if (kernel_log) {
    const auto said = run_shell("dmesg | tail -n +" + std::to_string(std::stoul(log_lines) + 1) + " | grep -i overlay");
    EXPECT_EQ(said.output.find("does not support tmpfile"), std::string::npos) << said.output;
    EXPECT_EQ(said.output.find("does not support RENAME_WHITEOUT"), std::string::npos) << said.output;
  }
  // overlayfs offers O_TMPFILE in the merged view only over an upper layer that has it.
  const int tmp = ::open(merged.path().c_str(), O_TMPFILE | O_RDWR, 0600);
  EXPECT_GE(tmp, 0) << std::strerror(errno);
  if (tmp >= 0) {
    EXPECT_EQ(::write(tmp, "t", 1), 1);
    ::close(tmp);
  }
  auto r = run_shell(
      "echo new > n && rm a && mv b b2 && rm -r dir && mkdir dir && echo app >> b2 && ls | tr '\\n' ' ' && cat b2",
      merged.path());
  run_shell("umount " + shell_quote(merged.path()));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "b2 dir n lower-b\napp\n");
  // The upper layer holds the whiteouts, the copied-up file and an opaque directory (a
  // trusted.overlay.* attribute, stored encrypted like the rest).
  EXPECT_EQ(describe(v.path("upper/a")), "char 0:0");
  EXPECT_EQ(describe(v.path("upper/b")), "char 0:0");
  EXPECT_EQ(describe(v.path("upper/b2")), "file lower-b\napp\n");
  EXPECT_EQ(run_shell("getfattr --only-values -n trusted.overlay.opaque " + shell_quote(v.path("upper/dir")) + " 2>/dev/null").output, "y");
  // Mounted again over the same layers after a remount of the vault: the same merged view.
  v.remount();
  ASSERT_EQ(run_shell("mount -t overlay overlay -o lowerdir=" + lower.path() + ",upperdir=" + v.path("upper") +
                      ",workdir=" + v.path("work") + " " + shell_quote(merged.path()))
                .status,
            0);
  r = run_shell("ls | tr '\\n' ' '; ls dir | wc -l", merged.path());
  run_shell("umount " + shell_quote(merged.path()));
  EXPECT_EQ(r.output, "b2 dir n 0\n");
}

}  // namespace
}  // namespace gcfs::test
