// The setuid and setgid rules of issue 19, item 1, as ext4 applies them: every expected mode
// below is what the same script gave on a loop-mounted ext4 image on the development machine.
// The callers: nobody (no supplementary groups, no capabilities), root, and root without
// CAP_FSETID (setpriv); the mount is served to all users (--allow-other).
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

VaultOptions served_to_all() {
  VaultOptions o;
  o.mount_args.push_back("--allow-other");
  return o;
}

// The mount and the folders above it open to nobody.
void open_to_others(const MountedVault& v) {
  const std::string top = v.mountpoint().substr(0, v.mountpoint().rfind('/'));
  ASSERT_EQ(::chmod(top.c_str(), 0755), 0) << std::strerror(errno);
  ASSERT_EQ(::chmod(v.mountpoint().c_str(), 0777), 0) << std::strerror(errno);
}

// Shell helpers for the scripts: m FILE prints "mode uid:gid"; mk FILE MODE [OWNER] makes an
// empty file; NB runs a command as nobody, NOCAP as root without CAP_FSETID.
const char* kHelpers =
    "NB='setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all'\n"
    "NOCAP='setpriv --inh-caps=-all --bounding-set=-fsetid'\n"
    "m() { stat -c '%a %u:%g' \"$1\"; }\n"
    "mk() { rm -f \"$1\"; touch \"$1\"; chown ${3:-0:0} \"$1\"; chmod \"$2\" \"$1\"; }\n";

std::string run_in(const MountedVault& v, const std::string& script) {
  auto r = run_shell(std::string(kHelpers) + script, v.mountpoint());
  EXPECT_EQ(r.status, 0) << r.output;
  return r.output;
}

// One change by one caller on files of the modes ext4 treats differently: setuid with group
// execute, setgid without it (6766, 2666), setgid with it (2676).
std::string each_mode(const MountedVault& v, const std::string& caller, const std::string& change,
                      const std::string& owner = "0:0") {
  std::string script;
  for (const char* mode : {"6777", "2666", "6766", "4777", "2676"})
    script += std::string("mk f ") + mode + " " + owner + "; echo hello > f; chmod " + mode + " f; " + caller + " " +
              change + "; echo \"" + mode + " -> $(m f)\"\n";
  return run_in(v, script);
}

TEST(PosixSetid, WriteByOtherUserClearsSuidAndSgidLikeExt4) {
  GCFS_REQUIRE_PROGRAM("setpriv");
  MountedVault v(served_to_all());
  open_to_others(v);
  const std::string want = "6777 -> 777 0:0\n2666 -> 666 0:0\n6766 -> 766 0:0\n4777 -> 777 0:0\n2676 -> 676 0:0\n";
  EXPECT_EQ(each_mode(v, "$NB", "sh -c 'echo x >> f'"), want) << "write";
  EXPECT_EQ(each_mode(v, "$NB", "truncate -s 1 f"), want) << "truncate";
  EXPECT_EQ(each_mode(v, "$NB", "sh -c ': > f'"), want) << "open with O_TRUNC";
  EXPECT_EQ(each_mode(v, "$NB", "fallocate -l 8192 f"), want) << "fallocate";
  EXPECT_EQ(each_mode(v, "$NB", "fallocate -p -o 0 -l 2 f"), want) << "punch hole";
}

// A user who makes a user namespace of his own (unshare -U -r) holds every capability in it, and
// none over the files this mount serves: his write, truncate or O_DIRECT write clears the setid
// bits as nobody's does, and he is not shown trusted.* attributes, which only CAP_SYS_ADMIN of
// the daemon's own namespace sees (as on ext4).
TEST(PosixSetid, CapabilitiesOfTheCallersOwnUserNamespaceCountForNothing) {
  GCFS_REQUIRE_PROGRAM("setpriv");
  GCFS_REQUIRE_PROGRAM("unshare");
  if (run_shell(std::string(kHelpers) + "$NB unshare -U -r true").status != 0)
    GTEST_SKIP() << "this machine does not let an ordinary user make a user namespace";
  MountedVault v(served_to_all());
  open_to_others(v);
  const std::string want = "6777 -> 777 0:0\n2666 -> 666 0:0\n6766 -> 766 0:0\n4777 -> 777 0:0\n2676 -> 676 0:0\n";
  const std::string ns_root = "$NB unshare -U -r";
  EXPECT_EQ(each_mode(v, ns_root, "sh -c 'echo x >> f'"), want) << "write";
  EXPECT_EQ(each_mode(v, ns_root, "truncate -s 1 f"), want) << "truncate";
  EXPECT_EQ(each_mode(v, ns_root, "dd if=/dev/zero of=f bs=4096 count=1 oflag=direct conv=notrunc status=none"), want)
      << "O_DIRECT write";
  GCFS_REQUIRE_PROGRAM("setfattr");
  const std::string listed = run_in(v,
                                    "mk t 0644; setfattr -n trusted.secret -v 1 t && setfattr -n user.plain -v 2 t\n"
                                    "echo \"root: $(getfattr -m - --absolute-names t 2>&1 | grep -c trusted.secret)\"\n"
                                    "echo \"ns root: $(" + ns_root + " getfattr -m - --absolute-names t 2>&1 | grep -c "
                                    "trusted.secret) $(" + ns_root + " getfattr -m - --absolute-names t 2>&1 | grep -c user.plain)\"\n");
  EXPECT_EQ(listed, "root: 1\nns root: 0 1\n");
}

// A write through O_DIRECT goes past the kernel's own clearing (it only flags the request), and
// the mode shown right after it must be the new one, not what the kernel had cached.
TEST(PosixSetid, DirectWriteByOtherUserClearsSuidAndSgidLikeExt4) {
  GCFS_REQUIRE_PROGRAM("setpriv");
  GCFS_REQUIRE_PROGRAM("dd");
  MountedVault v(served_to_all());
  open_to_others(v);
  const std::string want = "6777 -> 777 0:0\n2666 -> 666 0:0\n6766 -> 766 0:0\n4777 -> 777 0:0\n2676 -> 676 0:0\n";
  EXPECT_EQ(each_mode(v, "$NB", "dd if=/dev/zero of=f bs=4096 count=1 oflag=direct conv=notrunc status=none"), want);
  // Root keeps them (CAP_FSETID), without it loses them as a buffered write does.
  EXPECT_EQ(each_mode(v, "", "dd if=/dev/zero of=f bs=4096 count=1 oflag=direct conv=notrunc status=none"),
            "6777 -> 6777 0:0\n2666 -> 2666 0:0\n6766 -> 6766 0:0\n4777 -> 4777 0:0\n2676 -> 2676 0:0\n");
  EXPECT_EQ(each_mode(v, "$NOCAP", "dd if=/dev/zero of=f bs=4096 count=1 oflag=direct conv=notrunc status=none"),
            "6777 -> 777 0:0\n2666 -> 2666 0:0\n6766 -> 2766 0:0\n4777 -> 777 0:0\n2676 -> 676 0:0\n");
}

// The daemon skips the mode check of a write when the open file was last seen without setid
// bits (Inode::open_attr): a chmod that adds them while the file is open, between two writes,
// must still be seen by the second. O_DIRECT writes, which the kernel only flags (see above); the
// writer keeps the file open in between (descriptor 3), so what the daemon saw stays.
TEST(PosixSetid, BitsAddedWhileTheWriterHoldsTheFileOpenAreClearedByItsNextWrite) {
  GCFS_REQUIRE_PROGRAM("setpriv");
  GCFS_REQUIRE_PROGRAM("mkfifo");
  GCFS_REQUIRE_PROGRAM("dd");
  MountedVault v(served_to_all());
  open_to_others(v);
  // The writer (nobody) writes once, says so through one FIFO, waits on another while root adds
  // the bits, then writes again.
  const std::string write = "dd if=/dev/zero of=f bs=4096 count=1 oflag=direct conv=notrunc status=none";
  const std::string script =
      "sync_dir=$(mktemp -d) && chmod 755 \"$sync_dir\" && mkfifo -m 666 \"$sync_dir/written\" \"$sync_dir/go\" || exit 1\n"
      "mk f 0666; echo hello > f\n"
      "$NB sh -c 'exec 3<f; " + write + " && echo 1 > \"$1/written\" && read x < \"$1/go\" && " + write +
      "' sh \"$sync_dir\" &\n"
      "read x < \"$sync_dir/written\"; echo \"before: $(m f)\"; chmod 6777 f; echo \"chmod: $(m f)\"\n"
      "echo 1 > \"$sync_dir/go\"; wait $!; st=$?; echo \"after: $(m f) $st\"\n"
      "rm -rf \"$sync_dir\"\n";
  EXPECT_EQ(run_in(v, script), "before: 666 0:0\nchmod: 6777 0:0\nafter: 777 0:0 0\n");
}

TEST(PosixSetid, OwnerOutsideTheGroupLosesSgidOnWriteAndTruncate) {
  GCFS_REQUIRE_PROGRAM("setpriv");
  MountedVault v(served_to_all());
  open_to_others(v);
  // nobody owns the files; their group (root) is not one of nobody's.
  const std::string want = "6777 -> 777 65534:0\n2666 -> 666 65534:0\n6766 -> 766 65534:0\n4777 -> 777 65534:0\n"
                           "2676 -> 676 65534:0\n";
  EXPECT_EQ(each_mode(v, "$NB", "sh -c 'echo x >> f'", "65534:0"), want) << "write";
  EXPECT_EQ(each_mode(v, "$NB", "truncate -s 0 f", "65534:0"), want) << "truncate";
  // In the file's group: S_ISGID without group execute stays.
  EXPECT_EQ(each_mode(v, "$NB", "sh -c 'echo x >> f'", "65534:65534"),
            "6777 -> 777 65534:65534\n2666 -> 2666 65534:65534\n6766 -> 2766 65534:65534\n"
            "4777 -> 777 65534:65534\n2676 -> 676 65534:65534\n");
  // chgrp by the owner, judged on the old group.
  EXPECT_EQ(each_mode(v, "$NB", "chown 65534:65534 f", "65534:0"),
            "6777 -> 777 65534:65534\n2666 -> 666 65534:65534\n6766 -> 766 65534:65534\n"
            "4777 -> 777 65534:65534\n2676 -> 676 65534:65534\n");
}

TEST(PosixSetid, RootKeepsTheBitsOnlyWithCapFsetid) {
  GCFS_REQUIRE_PROGRAM("setpriv");
  MountedVault v(served_to_all());
  open_to_others(v);
  EXPECT_EQ(each_mode(v, "", "sh -c 'echo x >> f'"),
            "6777 -> 6777 0:0\n2666 -> 2666 0:0\n6766 -> 6766 0:0\n4777 -> 4777 0:0\n2676 -> 2676 0:0\n");
  EXPECT_EQ(each_mode(v, "$NOCAP", "sh -c 'echo x >> f'"),
            "6777 -> 777 0:0\n2666 -> 2666 0:0\n6766 -> 2766 0:0\n4777 -> 777 0:0\n2676 -> 676 0:0\n");
  EXPECT_EQ(each_mode(v, "", "chown 65534 f"),
            "6777 -> 777 65534:0\n2666 -> 2666 65534:0\n6766 -> 2766 65534:0\n4777 -> 777 65534:0\n"
            "2676 -> 676 65534:0\n");
  // chown(f, -1, -1), which changes neither and still clears the bits on ext4 (pjdfstest chown/00:
  // 06555 -> 0555), for root as for anyone: it reaches the daemon as a SETATTR that asks nothing.
  GCFS_REQUIRE_PROGRAM("perl");
  EXPECT_EQ(each_mode(v, "", "perl -e 'chown(-1, -1, \"f\") or die'"),
            "6777 -> 777 0:0\n2666 -> 2666 0:0\n6766 -> 2766 0:0\n4777 -> 777 0:0\n2676 -> 676 0:0\n");
  // A chown clears them on every kind but a directory: FIFOs, sockets and devices too (ext4;
  // pjdfstest chown/00), by root and by the owner changing the group.
  EXPECT_EQ(run_in(v,
                   "for k in fifo char; do rm -f n; if [ $k = fifo ]; then mkfifo n; else mknod n c 1 3; fi\n"
                   "chmod 06555 n; chown 65534:65533 n; echo \"$k root: $(m n)\"\n"
                   "chmod 06555 n; perl -e '$( = $) = \"65533 65533 65532\"; $< = $> = 65534; chown(-1, 65532, \"n\") or die'; "
                   "echo \"$k owner: $(m n)\"\n"
                   "chmod 06555 n; perl -e 'chown(-1, -1, \"n\") or die'; echo \"$k nothing: $(m n)\"; done\n"
                   "rm -f n; mkdir d; chmod 06755 d; chown 65534:65533 d; echo \"dir: $(m d)\"\n"),
            "fifo root: 555 65534:65533\nfifo owner: 555 65534:65532\nfifo nothing: 555 65534:65532\n"
            "char root: 555 65534:65533\nchar owner: 555 65534:65532\nchar nothing: 555 65534:65532\n"
            "dir: 6755 65534:65533\n");
}

// Runs fn as nobody with umask 0 in a child; its exit status.
int as_nobody(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(99);
    ::umask(0);
    ::_exit(fn());
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

std::string mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%o %u:%u", st.st_mode & 07777, st.st_uid, st.st_gid);
  return buf;
}

TEST(PosixSetid, NewEntriesInASetgidDirectoryInheritGroupAndBit) {
  MountedVault v(served_to_all());
  open_to_others(v);
  const std::string sg = v.path("sg");
  ASSERT_EQ(::mkdir(sg.c_str(), 0777), 0);
  ASSERT_EQ(::chown(sg.c_str(), 0, 1234), 0);
  ASSERT_EQ(::chmod(sg.c_str(), 02777), 0);
  ASSERT_EQ(as_nobody([&] {
              int fd = ::open((sg + "/f").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 02777);  // not in 1234: no S_ISGID
              if (fd < 0) return 1;
              ::close(fd);
              if (::mkdir((sg + "/d").c_str(), 0755) != 0) return 2;
              if (::mkdir((sg + "/ro").c_str(), 0555) != 0) return 3;  // made writable for the IV, then 0555
              return ::mkdir((sg + "/all").c_str(), 02777) != 0 ? 4 : 0;
            }),
            0);
  EXPECT_EQ(mode_of(sg + "/f"), "777 65534:1234");
  EXPECT_EQ(mode_of(sg + "/d"), "2755 65534:1234");
  EXPECT_EQ(mode_of(sg + "/ro"), "2555 65534:1234");
  EXPECT_EQ(mode_of(sg + "/all"), "2777 65534:1234");
  // Root under umask 027.
  const mode_t old = ::umask(027);
  ASSERT_EQ(::mkdir((sg + "/r").c_str(), 0777), 0);
  ::umask(old);
  EXPECT_EQ(mode_of(sg + "/r"), "2750 0:1234");
  // Everything survives a remount (stored in CIPHERDIR, not only in the kernel's cache).
  v.remount();
  EXPECT_EQ(mode_of(sg + "/ro"), "2555 65534:1234");
}

TEST(PosixSetid, ACallerMayCreateSetidFilesInItsOwnDirectory) {
  MountedVault v(served_to_all());
  open_to_others(v);
  const std::string own = v.path("own");
  ASSERT_EQ(::mkdir(own.c_str(), 0755), 0);
  ASSERT_EQ(::chown(own.c_str(), 65534, 65534), 0);
  ASSERT_EQ(as_nobody([&] {
              int fd = ::open((own + "/s").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 06755);
              if (fd < 0) return 1;
              ::close(fd);
              return ::mkdir((own + "/d").c_str(), 03755) != 0 ? 2 : 0;
            }),
            0);
  EXPECT_EQ(mode_of(own + "/s"), "6755 65534:65534");
  EXPECT_EQ(mode_of(own + "/d"), "1755 65534:65534");  // mkdir(2) never sets S_ISGID from the mode
}

}  // namespace
}  // namespace gcfs::test
