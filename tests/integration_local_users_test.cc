// Other local users under --allow-other (issue 18, finding 9): a mount that root serves to every
// user must give none of them more than the plaintext modes do, must not be run out of
// descriptors by one of them, must not show them heap addresses, and must say when CIPHERDIR
// itself is within their reach. The unprivileged side runs as "nobody" in a forked child.
#include <fcntl.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

// Runs fn in a child process as nobody (no supplementary groups) and returns what it wrote to
// its pipe; the child's exit status goes to *status. Only syscalls run in the child.
std::string as_nobody(const std::function<void(int out)>& fn, int* status) {
  int p[2];
  if (::pipe(p) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNogroup, kNogroup, kNogroup) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0)
      ::_exit(99);
    fn(p[1]);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

void put(int fd, const std::string& s) {
  if (::write(fd, s.data(), s.size()) < 0) { /* the parent reports a short answer */ }
}

double now_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// A mount served to everyone, with the test's folders open to nobody up to the mountpoint.
VaultOptions allow_other(const std::string& prefix = "") {
  VaultOptions o;
  o.mount_args.push_back("--allow-other");
  o.shell_prefix = prefix;
  return o;
}

void open_to_others(const MountedVault& v) {
  const std::string top = v.mountpoint().substr(0, v.mountpoint().rfind('/'));
  ASSERT_EQ(::chmod(top.c_str(), 0755), 0) << std::strerror(errno);
  // The mount's root has CIPHERDIR's mode (0700 from the fixture).
  ASSERT_EQ(::chmod(v.mountpoint().c_str(), 0755), 0) << std::strerror(errno);
}

// The backing entry of a path in the mount (same directory level as rel's parent), by inode.
std::string backing_path(const MountedVault& v, const std::string& rel) {
  struct stat st {};
  if (::lstat(v.path(rel).c_str(), &st) != 0) return "";
  auto r = run_shell("find " + shell_quote(v.cipherdir()) + " -inum " + std::to_string(st.st_ino) + " -print -quit");
  if (!r.output.empty() && r.output.back() == '\n') r.output.pop_back();
  return r.output;
}

// An ext4 image with half its blocks reserved for root, loop-mounted for one test and always
// unmounted again; empty path() where this machine cannot make one.
class ReservedExt4 {
 public:
  ReservedExt4() : dir_("gcfs-ext4") {
    image_ = dir_.path() + "/image";
    mnt_ = dir_.path() + "/mnt";
    ::chmod(dir_.path().c_str(), 0755);  // other users reach the mount through it
    ::mkdir(mnt_.c_str(), 0755);
    const auto r = run_shell("truncate -s 64M " + shell_quote(image_) + " && mkfs.ext4 -q -F -m 50 " + shell_quote(image_) +
                             " && mount -o loop " + shell_quote(image_) + " " + shell_quote(mnt_));
    if (r.status == 0) mounted_ = true;
    else why_ = r.output;
  }
  ~ReservedExt4() {
    if (mounted_) run_shell("umount " + shell_quote(mnt_) + " || umount -l " + shell_quote(mnt_));
  }
  const std::string& path() const { return mounted_ ? mnt_ : why_; }
  bool ok() const { return mounted_; }

 private:
  TempDir dir_;
  std::string image_, mnt_, why_;
  bool mounted_ = false;
};

// Space the root daemon allocates for another user is charged as that user's own writes are:
// an ordinary user's fallocate or write through the mount cannot spend root's reserved blocks
// (it filled such an ext4 to 100%, leaving nothing for root's own services), while root's own
// requests still can.
TEST(LocalUsers, AnotherUsersWritesCannotSpendRootsReservedBlocks) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a loop-mounted ext4 and a mount served to another user";
  GCFS_REQUIRE_PROGRAM("mkfs.ext4");
  GCFS_REQUIRE_PROGRAM("setpriv");
  ReservedExt4 ext4;
  if (!ext4.ok()) GTEST_SKIP() << "cannot loop-mount an ext4 image here: " << ext4.path();
  ASSERT_EQ(::chmod(ext4.path().c_str(), 0755), 0);
  VaultOptions o = allow_other();
  o.parent_dir = ext4.path();
  {
    MountedVault v(o);
    open_to_others(v);
    ASSERT_EQ(::mkdir(v.path("mine").c_str(), 0777), 0);
    ASSERT_EQ(::chmod(v.path("mine").c_str(), 0777), 0);
    EXPECT_NE(v.log().find("space is charged to the caller"), std::string::npos) << v.log();
    const std::string nb = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    // About 28 MiB are free to an ordinary user, 60 to root.
    auto r = run_shell(nb + "fallocate -l 40M " + shell_quote(v.path("mine/big")));
    EXPECT_NE(r.status, 0) << "an ordinary user's fallocate spent root's reserved blocks";
    EXPECT_NE(r.output.find("No space left"), std::string::npos) << r.output;
    r = run_shell(nb + "dd if=/dev/zero of=" + shell_quote(v.path("mine/written")) + " bs=1M count=40 status=none");
    EXPECT_NE(r.status, 0) << "an ordinary user's writes spent root's reserved blocks";
    EXPECT_NE(r.output.find("No space left"), std::string::npos) << r.output;
    run_shell("rm -f " + shell_quote(v.path("mine/written")) + " " + shell_quote(v.path("mine/big")));
    // Whatever the user fills through the mount, root's reserve is left for root.
    r = run_shell(nb + "dd if=/dev/zero of=" + shell_quote(v.path("mine/fill")) + " bs=1M count=100 status=none");
    EXPECT_NE(r.output.find("No space left"), std::string::npos) << r.output;
    r = run_shell("fallocate -l 8M " + shell_quote(v.path("roots")));
    EXPECT_EQ(r.status, 0) << r.output;
  }
}

// The race of the issue: the kernel looks a name up (absent), then sends CREATE; meanwhile the
// file appears in CIPHERDIR (a second mount of the vault, a sync tool, root working there). The
// daemon's create then met EEXIST and opened the existing file read-write with its own rights,
// and the kernel, believing the file new, checked nothing: nobody got a read-write handle on
// root's 0600 file. Now such a create never hands out a file the daemon did not make itself.
TEST(LocalUsers, CreateNeverOpensAFileTheCallerMayNotOpen) {
  MountedVault v(allow_other());
  open_to_others(v);
  ASSERT_EQ(::mkdir(v.path("shared").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(v.path("shared").c_str(), 0777), 0);
  write_file(v.path("shared/victim"), "");
  const std::string backing = backing_path(v, "shared/victim");
  ASSERT_FALSE(backing.empty());
  ASSERT_EQ(::unlink(v.path("shared/victim").c_str()), 0);

  // The premise: the kernel checks modes and owners itself on this mount (there is no option to
  // turn that off), so a create that hands out only new files leaves every other open to it.
  std::string options;
  {
    std::istringstream mounts(read_file("/proc/self/mounts"));
    for (std::string line; std::getline(mounts, line);)
      if (line.find(" " + v.mountpoint() + " ") != std::string::npos) options = line;
  }
  EXPECT_NE(options.find("default_permissions"), std::string::npos) << options;
  EXPECT_NE(options.find("allow_other"), std::string::npos) << options;

  // mknod(2) of a regular file is made the same way, and given to its maker.
  int status = 0;
  std::string out = as_nobody(
      [&](int o) {
        const std::string p = v.path("shared/by-mknod");
        if (::mknod(p.c_str(), S_IFREG | 0640, 0) != 0) return put(o, std::string("mknod: ") + std::strerror(errno));
        int fd = ::open(p.c_str(), O_RDWR);
        struct stat st {};
        put(o, fd >= 0 && ::write(fd, "x", 1) == 1 && ::fstat(fd, &st) == 0
                   ? std::to_string(st.st_uid) + " " + std::to_string(st.st_mode & 07777) + " " + std::to_string(st.st_size)
                   : std::string("open/write: ") + std::strerror(errno));
      },
      &status);
  EXPECT_EQ(out, std::to_string(kNobody) + " " + std::to_string(0640) + " 1");

  // Plain case first: an existing root 0600 file is refused to nobody.
  write_file(v.path("shared/secret"), "root only");
  ASSERT_EQ(::chmod(v.path("shared/secret").c_str(), 0600), 0);
  out = as_nobody(
      [&](int o) {
        int fd = ::open(v.path("shared/secret").c_str(), O_CREAT | O_RDWR, 0666);
        put(o, fd >= 0 ? "opened" : std::strerror(errno));
      },
      &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, std::strerror(EACCES));

  // The race: root makes and removes a 0600 file under the backing name as fast as it can, while
  // nobody opens the name with O_CREAT through the mount and checks whose file it got.
  std::atomic<bool> stop{false};
  std::thread racer([&] {
    while (!stop) {
      int fd = ::open(backing.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
      if (fd >= 0) ::close(fd);
      ::unlink(backing.c_str());
    }
  });
  const double seconds = 2.0;
  out = as_nobody(
      [&](int o) {
        const std::string p = v.path("shared/victim");
        long created = 0, refused = 0, stale = 0, other = 0, roots = 0, unlink_errors = 0;
        int first_unlink_error = 0;
        const double end = now_s() + seconds;
        while (now_s() < end && roots == 0) {
          int fd = ::open(p.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
          if (fd < 0) {
            ++(errno == EACCES ? refused : errno == ESTALE ? stale : other);
          } else {
            struct stat st {};
            if (::fstat(fd, &st) == 0 && st.st_uid != kNobody) ++roots;
            else ++created;
            ::close(fd);
          }
          // The directory is 0777: whatever is there goes, and the kernel forgets the name, so the
          // next open looks it up again instead of using a cached entry.
          if (::unlink(p.c_str()) != 0 && errno != ENOENT && ++unlink_errors == 1) first_unlink_error = errno;
        }
        put(o, "handles on root's file: " + std::to_string(roots) + "; created " + std::to_string(created) +
                   ", refused " + std::to_string(refused) + ", stale " + std::to_string(stale) + ", other errors " +
                   std::to_string(other) + ", unlink errors " + std::to_string(unlink_errors) + " (" + std::strerror(first_unlink_error) + ")");
      },
      &status);
  stop = true;
  racer.join();
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("handles on root's file: 0;"), std::string::npos) << out;
  // Both outcomes happened: the race was run, not missed.
  EXPECT_EQ(out.find("created 0,"), std::string::npos) << out;
  EXPECT_EQ(out.find("refused 0,"), std::string::npos) << out;
  std::cout << out << "\n";
}

// How many descriptors a process holds.
std::size_t open_fds(pid_t pid) {
  auto r = run_shell("ls /proc/" + std::to_string(pid) + "/fd | wc -l");
  return static_cast<std::size_t>(std::stoul(r.output));
}

// Every directory the kernel remembers held a descriptor for good: one user who made enough of
// them ran the daemon out, and every call of every user failed. Directories are now cached up to
// a budget (a quarter of what is free at this limit: 48 beyond twice what the daemon holds after
// starting with the engine under test) and opened again by name, from the nearest cached ancestor, beyond
// it: nobody's 100 directories and a chain 40 deep (each mkdir syncs its IV, so not more) leave the
// mount serving root.
TEST(LocalUsers, ManyDirectoriesOfOneUserLeaveTheMountServingOthers) {
  MountedVault v(allow_other(low_descriptor_limit(48)));
  open_to_others(v);
  ASSERT_EQ(::mkdir(v.path("home").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(v.path("home").c_str(), 0777), 0);
  ASSERT_EQ(::mkdir(v.path("root-work").c_str(), 0700), 0);
  int status = 0;
  const std::string home = v.path("home");
  std::string out = as_nobody(
      [&](int o) {
        int made = 0, failed = 0;
        for (int i = 0; i < 100; ++i) {
          const std::string d = home + "/d" + std::to_string(i);
          if (::mkdir(d.c_str(), 0755) == 0) ++made;
          else ++failed;
        }
        // Deep: each level is looked up from the one above.
        std::string deep = home + "/deep";
        int depth = 0;
        for (; depth < 40; ++depth, deep += "/x")
          if (::mkdir(deep.c_str(), 0755) != 0) break;
        // Keep them all remembered by the kernel: stat every one.
        int seen = 0;
        struct stat st {};
        for (int i = 0; i < 100; ++i)
          if (::stat((home + "/d" + std::to_string(i)).c_str(), &st) == 0) ++seen;
        put(o, "made " + std::to_string(made) + " failed " + std::to_string(failed) + " seen " + std::to_string(seen) +
                   " depth " + std::to_string(depth));
      },
      &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "made 100 failed 0 seen 100 depth 40") << v.log();
  EXPECT_LT(open_fds(v.daemon_pid()), static_cast<std::size_t>(low_descriptor_limit_value(48)));
  struct stat st {};
  ASSERT_EQ(::stat(v.path("home/d7").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);  // given to its maker, through the daemon's own descriptor
  EXPECT_EQ(st.st_gid, kNogroup);

  // root, meanwhile: a new file and directory, written, read back and listed.
  write_file(v.path("root-work/notes"), "still served");
  ASSERT_EQ(::mkdir(v.path("root-work/sub").c_str(), 0700), 0);
  write_file(v.path("root-work/sub/more"), "and more");
  EXPECT_EQ(read_file(v.path("root-work/notes")), "still served");
  EXPECT_EQ(read_file(v.path("root-work/sub/more")), "and more");
  auto listed = v.sh("ls home | wc -l; ls -R home/deep | grep -c ':$'");
  EXPECT_EQ(listed.output, "101\n40\n") << listed.output;
  // The deepest directory, reached again after its ancestors' descriptors were evicted.
  std::string deepest = "home/deep";
  for (int i = 1; i < 40; ++i) deepest += "/x";
  write_file(v.path(deepest + "/leaf"), "at the bottom");
  auto evict = v.sh("ls home/d* > /dev/null");
  ASSERT_EQ(evict.status, 0) << evict.output;
  EXPECT_EQ(read_file(v.path(deepest + "/leaf")), "at the bottom");
  EXPECT_LT(open_fds(v.daemon_pid()), static_cast<std::size_t>(low_descriptor_limit_value(48)));
  EXPECT_EQ(v.log().find("out of file descriptors"), std::string::npos) << v.log();
  EXPECT_EQ(v.log().find("behind the daemon's back"), std::string::npos) << v.log();
}

// Node IDs reach every user: the kernel puts them into the handles of name_to_handle_at. They were
// the daemon's heap addresses; now they count up from the root's 1.
TEST(LocalUsers, NodeIdsAreNotAddresses) {
  MountedVault v;
  std::vector<std::uint64_t> ids;
  for (const char* name : {"a", "b", "c", "d"}) {
    write_file(v.path(name), name);
    std::vector<char> buf(sizeof(file_handle) + MAX_HANDLE_SZ);
    auto* fh = reinterpret_cast<file_handle*>(buf.data());
    fh->handle_bytes = MAX_HANDLE_SZ;
    int mount_id = 0;
    ASSERT_EQ(::name_to_handle_at(AT_FDCWD, v.path(name).c_str(), fh, &mount_id, 0), 0) << std::strerror(errno);
    // FUSE's handle: the node ID's high and low 32 bits, then the generation.
    ASSERT_EQ(fh->handle_bytes, 12u);
    std::uint32_t w[3];
    std::memcpy(w, fh->f_handle, sizeof w);
    ids.push_back((static_cast<std::uint64_t>(w[0]) << 32) | w[1]);
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_LT(ids[i], 1000u) << "node ID " << std::hex << ids[i] << " looks like an address";
    if (i > 0) {
      EXPECT_GT(ids[i], ids[i - 1]);
    }
  }
}

// --allow-other with a CIPHERDIR that other users can reach or replace: one warning line, on the
// terminal of `mount` and in the log, naming the folder and why. None for a private CIPHERDIR.
TEST(LocalUsers, AllowOtherWarnsWhenOthersCanReachCipherdir) {
  VaultOptions o = allow_other();
  o.mount = false;
  MountedVault v(o);
  const std::string top = v.cipherdir().substr(0, v.cipherdir().rfind('/'));
  const std::string warning = "other users can reach CIPHERDIR";
  auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
    return n;
  };
  // Mounts, says what the terminal showed, unmounts and waits for the daemon's last log line.
  std::size_t mounts = 0;
  auto mount_output = [&] {
    auto r = run_shell(v.mount_command() + " && " + MountedVault::unmount_command(false) + shell_quote(v.mountpoint()));
    EXPECT_EQ(r.status, 0) << r.output;
    ++mounts;
    for (int i = 0; i < 200 && count(v.log(), "info: unmounted ") < mounts; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    return r.output;
  };
  // The fixture's folders are 0700: private.
  std::string out = mount_output();
  EXPECT_EQ(count(out, warning), 0u) << out;
  EXPECT_EQ(count(v.log(), warning), 0u) << v.log();

  // Everyone may enter the folder above and CIPHERDIR itself.
  ASSERT_EQ(::chmod(top.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(v.cipherdir().c_str(), 0755), 0);
  out = mount_output();
  EXPECT_EQ(count(out, warning), 1u) << out;
  EXPECT_EQ(count(v.log(), warning), 1u) << v.log();
  EXPECT_NE(out.find("CIPHERDIR " + v.cipherdir() + " (mode 0755, owner uid 0) can be entered by group or others"),
            std::string::npos)
      << out;

  // A private folder above keeps others out, even with CIPHERDIR 0755 (the mount's root then
  // shows 0755 to the users the mount serves).
  ASSERT_EQ(::chmod(top.c_str(), 0700), 0);
  out = mount_output();
  EXPECT_EQ(count(out, warning), 0u) << out;

  // The folder above belongs to another user, who could swap CIPHERDIR for another.
  ASSERT_EQ(::chown(top.c_str(), kNobody, kNogroup), 0);
  out = mount_output();
  ASSERT_EQ(::chown(top.c_str(), 0, 0), 0);
  EXPECT_NE(out.find(top + " (mode 0700, owner uid 65534) belongs to another user"), std::string::npos) << out;
  EXPECT_EQ(count(v.log(), warning), 2u) << v.log();
}

}  // namespace
}  // namespace gcfs::test
