// A hostile backing folder (issue 18, finding 4) through a real mount: every shape (FIFO, socket,
// directory, symbolic link to inside and to outside CIPHERDIR, device node, empty file, huge
// sparse file) planted where the vault keeps a subdirectory's IV, a long name's .name file, a
// content file and a directory. Every operation (list, stat, read, create, remove) runs in a child
// process with a deadline, so a daemon worker that blocks fails the test instead of hanging it.
// Each must end at once with a clear error (EIO for the vault's own files, logged with the
// ciphertext path and what was found) or behave as the shape allows; afterwards other directories
// still work, the mount unmounts, and a canary folder outside CIPHERDIR (the target of the
// outside links, holding copies that would "work" if followed) is unchanged.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

namespace fsys = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(5);

// ---------------------------------------------------------------------------------------------
// Operations in a child process with a deadline.

struct Outcome {
  bool hung = false;
  bool skipped = false;  // not run: an earlier operation hung, and later ones would only wait too
  int err = -1;     // 0 or the errno the operation failed with
  std::string out;  // what the operation wrote (a listing)
};

std::string describe(const Outcome& o) {
  if (o.skipped) return "not run (an earlier operation hung)";
  if (o.hung) return "HUNG (still blocked after the deadline)";
  return o.err == 0 ? std::string("ok") : std::string(std::strerror(o.err));
}

struct Child {
  pid_t pid = -1;
  int out_fd = -1;
};

// Set once an operation hung: the daemon has a worker stuck for good then, so the test stops
// starting new operations and fails at once instead of waiting out a deadline for each.
bool g_something_hung = false;

// Starts op (which returns 0 or an errno and may write to the given descriptor) in a child.
Child start(const std::function<int(int out)>& op) {
  if (g_something_hung) return {0, -1};
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    // A child stuck in the mount must not hold the test's own output open (ctest waits for it).
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::_exit(op(p[1]) & 0xff);
  }
  ::close(p[1]);
  return {pid, p[0]};
}

// Waits for a child until the deadline; a child still running then is killed (a FUSE request
// waits killably) and reported as hung.
Outcome finish(Child c, Clock::time_point deadline) {
  Outcome o;
  if (c.pid == 0) {
    o.skipped = true;
    return o;
  }
  if (c.pid < 0) return o;
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(c.pid, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (done == 0) {
    o.hung = true;
    g_something_hung = true;
    // A request the daemon has taken is waited for even by a killed process: reap the child if
    // it goes, else leave it (it ends when the mount's teardown kills the daemon).
    ::kill(c.pid, SIGKILL);
    for (int i = 0; i < 50 && ::waitpid(c.pid, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } else {
    o.err = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }
  char buf[4096];
  ::fcntl(c.out_fd, F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = ::read(c.out_fd, buf, sizeof buf)) > 0;) o.out.append(buf, static_cast<std::size_t>(n));
  if (c.out_fd >= 0) ::close(c.out_fd);
  return o;
}

Outcome run(const std::function<int(int out)>& op) { return finish(start(op), Clock::now() + kDeadline); }

// ls: the names, one a line.
std::function<int(int)> op_list(const std::string& dir) {
  return [dir](int out) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return errno;
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      std::string line = std::string(e->d_name) + "\n";
      if (::write(out, line.data(), line.size()) < 0) break;
      errno = 0;
    }
    int err = errno;
    ::closedir(d);
    return err;
  };
}

std::function<int(int)> op_stat(const std::string& path) {
  return [path](int out) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return errno;
    std::string mode = std::to_string(st.st_mode & S_IFMT);
    (void)!::write(out, mode.data(), mode.size());
    return 0;
  };
}

// cat, without blocking on what the kernel itself treats as a FIFO.
std::function<int(int)> op_cat(const std::string& path) {
  return [path](int out) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd < 0) return errno;
    char buf[65536];
    ssize_t n;
    std::size_t total = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && total < (1u << 20)) {
      (void)!::write(out, buf, static_cast<std::size_t>(n));
      total += static_cast<std::size_t>(n);
    }
    int err = n < 0 && errno != EAGAIN ? errno : 0;
    ::close(fd);
    return err;
  };
}

std::function<int(int)> op_create(const std::string& path) {
  return [path](int) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK, 0644);
    if (fd < 0) return errno;
    int err = ::write(fd, "new\n", 4) == 4 ? 0 : errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    return err;
  };
}

std::function<int(int)> op_unlink(const std::string& path) {
  return [path](int) { return ::unlink(path.c_str()) == 0 ? 0 : errno; };
}

std::function<int(int)> op_rmdir(const std::string& path) {
  return [path](int) { return ::rmdir(path.c_str()) == 0 ? 0 : errno; };
}

// ---------------------------------------------------------------------------------------------
// Planting shapes.

enum class Shape { Fifo, Socket, Directory, LinkInside, LinkOutside, Device, Empty, Huge };
const Shape kShapes[] = {Shape::Fifo,        Shape::Socket, Shape::Directory, Shape::LinkInside,
                         Shape::LinkOutside, Shape::Device, Shape::Empty,     Shape::Huge};

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::Fifo: return "fifo";
    case Shape::Socket: return "socket";
    case Shape::Directory: return "dir";
    case Shape::LinkInside: return "linkin";
    case Shape::LinkOutside: return "linkout";
    case Shape::Device: return "device";
    case Shape::Empty: return "empty";
    case Shape::Huge: return "huge";
  }
  return "?";
}

constexpr off_t kHugeSize = off_t{1} << 40;  // 1 TiB, sparse

// Whether this machine lets us make device nodes (root outside a restricted container).
bool can_mknod(const std::string& dir) {
  const std::string p = dir + "/mknod-probe";
  bool ok = ::mknod(p.c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0;
  ::unlink(p.c_str());
  return ok;
}

std::string read_whole(const std::string& path) { return read_file(path); }

// Puts `shape` at target (which must not exist). For the links: inside_copy is a path inside
// CIPHERDIR and outside_copy one in the canary folder, each holding a copy of what was there, so
// following the link would "work" and be noticed.
void plant(Shape shape, const std::string& target, const std::string& inside_copy, const std::string& outside_copy) {
  switch (shape) {
    case Shape::Fifo:
      ASSERT_EQ(::mkfifo(target.c_str(), 0644), 0) << target;
      break;
    case Shape::Socket: {
      int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
      ASSERT_GE(s, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      // A relative name keeps within sun_path's 108 bytes however long TMPDIR is.
      const fsys::path t(target);
      const std::string cwd = fsys::current_path();
      fsys::current_path(t.parent_path());
      std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", t.filename().c_str());
      int rc = ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      fsys::current_path(cwd);
      ::close(s);
      ASSERT_EQ(rc, 0) << target << ": " << std::strerror(errno);
      break;
    }
    case Shape::Directory:
      ASSERT_EQ(::mkdir(target.c_str(), 0755), 0) << target;
      break;
    case Shape::LinkInside:
      ASSERT_EQ(::symlink(inside_copy.c_str(), target.c_str()), 0) << target;
      break;
    case Shape::LinkOutside:
      ASSERT_EQ(::symlink(outside_copy.c_str(), target.c_str()), 0) << target;
      break;
    case Shape::Device:
      ASSERT_EQ(::mknod(target.c_str(), S_IFCHR | 0666, makedev(1, 5)), 0) << target;  // /dev/zero
      break;
    case Shape::Empty:
      write_file(target, "");
      break;
    case Shape::Huge: {
      write_file(target, "");
      ASSERT_EQ(::truncate(target.c_str(), kHugeSize), 0) << target << ": " << std::strerror(errno);
      break;
    }
  }
}

// Every path under root with its type, size and content (links: their target): equal snapshots
// mean nothing there was created, removed or changed.
std::map<std::string, std::string> snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto it = fsys::recursive_directory_iterator(root); it != fsys::recursive_directory_iterator(); ++it) {
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    std::string v = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " ";
    if (S_ISREG(st.st_mode)) v += read_whole(it->path());
    if (S_ISLNK(st.st_mode)) v += fsys::read_symlink(it->path()).string();
    out[it->path().string()] = v;
  }
  return out;
}

// The backing path of every inode number under root (directories and files, no link followed).
std::map<ino_t, std::string> backing_by_inode(const std::string& root) {
  std::map<ino_t, std::string> out;
  for (auto it = fsys::recursive_directory_iterator(root); it != fsys::recursive_directory_iterator(); ++it) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0) out[st.st_ino] = it->path().string();
  }
  return out;
}

// Whether one line of the log holds both a and b.
bool log_line_has(const std::string& log, const std::string& a, const std::string& b) {
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
  return false;
}

int count_occurrences(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

// ---------------------------------------------------------------------------------------------

class BackingShapes : public ::testing::Test {
 protected:
  void SetUp() override {
    g_something_hung = false;
    cipher_real_ = fsys::canonical(v_.cipherdir()).string();
    canary_ = canary_dir_.path();
    write_file(canary_ + "/untouched.txt", "canary contents\n");
  }

  // The ciphertext path of a plaintext path (the daemon passes backing inode numbers through).
  std::string backing(const std::string& rel, const std::map<ino_t, std::string>& by_ino) {
    struct stat st {};
    if (::lstat(v_.path(rel).c_str(), &st) != 0) return "";
    auto it = by_ino.find(st.st_ino);
    return it == by_ino.end() ? "" : fsys::canonical(it->second).string();
  }

  MountedVault v_;
  TempDir canary_dir_{"gcfs-canary"};
  std::string cipher_real_, canary_;
};

const std::string kLongName(200, 'n');  // encrypts to more than 255 bytes: a long name

// The words the daemon's log uses for each shape found where a regular file belongs.
std::string found_word(Shape s, bool name_file) {
  switch (s) {
    case Shape::Fifo: return "is a FIFO";
    case Shape::Socket: return "is a socket";
    case Shape::Directory: return "is a directory";
    case Shape::LinkInside:
    case Shape::LinkOutside: return "symbolic link";
    case Shape::Device: return "is a character device";
    case Shape::Empty: return name_file ? "is empty" : "has 0 bytes";
    case Shape::Huge: return name_file ? "holds " + std::to_string(kHugeSize) + " bytes" : "has " + std::to_string(kHugeSize) + " bytes";
  }
  return "";
}

// Each shape in each role, in one mount: iv_<shape>/ (its gpucryptfs.diriv), nm_<shape>/<long
// name> (its .name file), ct_<shape>/file (its content file) and dr_<shape>/sub (a directory).
TEST_F(BackingShapes, EveryShapeInEveryRoleIsReportedAndNeverBlocks) {
  std::vector<Shape> shapes;
  const bool devices = can_mknod(canary_);
  for (Shape s : kShapes)
    if (s != Shape::Device || devices) shapes.push_back(s);

  write_file(v_.path("ok.txt"), "still served\n");
  for (Shape s : shapes) {
    const std::string n = shape_name(s);
    ASSERT_EQ(::mkdir(v_.path("iv_" + n).c_str(), 0755), 0);
    write_file(v_.path("iv_" + n + "/file"), "iv role\n");
    ASSERT_EQ(::mkdir(v_.path("nm_" + n).c_str(), 0755), 0);
    write_file(v_.path("nm_" + n + "/" + kLongName), "name role\n");
    ASSERT_EQ(::mkdir(v_.path("ct_" + n).c_str(), 0755), 0);
    write_file(v_.path("ct_" + n + "/file"), "content role\n");
    ASSERT_EQ(::mkdir(v_.path("dr_" + n).c_str(), 0755), 0);
    ASSERT_EQ(::mkdir(v_.path("dr_" + n + "/sub").c_str(), 0755), 0);
    write_file(v_.path("dr_" + n + "/sub/inner"), "dir role\n");
  }
  // Where each role's file lives in CIPHERDIR, found while mounted, then planted unmounted (so
  // the remount reads every one of them afresh).
  const auto by_ino = backing_by_inode(v_.cipherdir());
  struct Target {
    Shape shape;
    std::string iv, name_file, content, dir;
  };
  std::vector<Target> targets;
  for (Shape s : shapes) {
    const std::string n = shape_name(s);
    Target t{s, backing("iv_" + n, by_ino) + "/gpucryptfs.diriv", backing("nm_" + n + "/" + kLongName, by_ino) + ".name",
             backing("ct_" + n + "/file", by_ino), backing("dr_" + n + "/sub", by_ino)};
    ASSERT_NE(t.iv.rfind(cipher_real_, 0), std::string::npos) << t.iv;
    ASSERT_NE(t.name_file.find("gcfs.longname."), std::string::npos) << t.name_file;
    ASSERT_NE(t.content.rfind(cipher_real_, 0), std::string::npos);
    ASSERT_NE(t.dir.rfind(cipher_real_, 0), std::string::npos);
    targets.push_back(t);
  }
  v_.unmount();

  for (const Target& t : targets) {
    const std::string n = shape_name(t.shape);
    // Copies of what was there: inside CIPHERDIR (under names the vault ignores) and in the canary.
    const std::string in = cipher_real_ + "/zz.copy." + n;
    const std::string out = canary_ + "/copy." + n;
    fsys::create_directories(in);
    fsys::create_directories(out);
    fsys::copy_file(t.iv, in + "/iv");
    fsys::copy_file(t.iv, out + "/iv");
    fsys::copy_file(t.name_file, in + "/name");
    fsys::copy_file(t.name_file, out + "/name");
    fsys::copy_file(t.content, in + "/content");
    fsys::copy_file(t.content, out + "/content");
    fsys::copy(t.dir, in + "/dir", fsys::copy_options::recursive);
    fsys::copy(t.dir, out + "/dir", fsys::copy_options::recursive);

    for (const std::string* p : {&t.iv, &t.name_file, &t.content}) ASSERT_TRUE(fsys::remove(*p)) << *p;
    fsys::remove_all(t.dir);
    plant(t.shape, t.iv, in + "/iv", out + "/iv");
    plant(t.shape, t.name_file, in + "/name", out + "/name");
    plant(t.shape, t.content, in + "/content", out + "/content");
    plant(t.shape, t.dir, in + "/dir", out + "/dir");
    if (::testing::Test::HasFatalFailure()) return;
  }
  const auto canary_before = snapshot(canary_);
  v_.mount();

  for (const Target& t : targets) {
    const std::string n = shape_name(t.shape);
    SCOPED_TRACE("shape " + n);
    ASSERT_FALSE(g_something_hung) << "an operation hung: a daemon worker is stuck for good";

    // The directory IV: every operation in that directory is EIO, and the log says why.
    for (auto [what, o] : {std::pair{"ls", run(op_list(v_.path("iv_" + n)))},
                           std::pair{"stat", run(op_stat(v_.path("iv_" + n + "/file")))},
                           std::pair{"cat", run(op_cat(v_.path("iv_" + n + "/file")))},
                           std::pair{"create", run(op_create(v_.path("iv_" + n + "/new")))},
                           std::pair{"rm", run(op_unlink(v_.path("iv_" + n + "/file")))}})
      EXPECT_EQ(describe(o), std::strerror(EIO)) << what << " in a directory whose IV is a " << n;
    // rmdir of that directory: it holds a file, so ENOTEMPTY; never "is a directory" or a hang.
    EXPECT_EQ(describe(run(op_rmdir(v_.path("iv_" + n)))), std::strerror(ENOTEMPTY));
    EXPECT_TRUE(log_line_has(v_.log(), t.iv + ": ", found_word(t.shape, false)))
        << "no log line names " << t.iv << " with \"" << found_word(t.shape, false) << "\":\n" << v_.log();

    // The .name file: the listing leaves that one entry out (never following a link to a copy
    // that would decrypt), says why, and the file itself is still there by its name.
    {
      Outcome ls = run(op_list(v_.path("nm_" + n)));
      EXPECT_EQ(describe(ls), "ok") << "ls of a directory with a damaged .name file";
      EXPECT_EQ(ls.out.find(kLongName), std::string::npos) << "a .name file that is a " << n << " was used";
      EXPECT_TRUE(log_line_has(v_.log(), t.name_file + ": ", found_word(t.shape, true)))
          << "no log line names " << t.name_file << " with \"" << found_word(t.shape, true) << "\":\n" << v_.log();
      Outcome cat = run(op_cat(v_.path("nm_" + n + "/" + kLongName)));
      EXPECT_EQ(describe(cat), "ok");
      EXPECT_EQ(cat.out, "name role\n");
      EXPECT_EQ(describe(run(op_create(v_.path("nm_" + n + "/" + std::string(190, 'm'))))), "ok");
      EXPECT_EQ(describe(run(op_unlink(v_.path("nm_" + n + "/" + kLongName)))), "ok");
    }

    // The content file: the entry shows what is there now; nothing blocks, nothing is followed.
    {
      EXPECT_EQ(describe(run(op_list(v_.path("ct_" + n)))), "ok");
      Outcome st = run(op_stat(v_.path("ct_" + n + "/file")));
      EXPECT_FALSE(st.hung);
      Outcome cat = run(op_cat(v_.path("ct_" + n + "/file")));
      EXPECT_FALSE(cat.hung) << "cat of a content file replaced by a " << n;
      EXPECT_EQ(cat.out.find("content role"), std::string::npos);
      if (t.shape == Shape::LinkInside || t.shape == Shape::LinkOutside || t.shape == Shape::Huge) {
        EXPECT_EQ(describe(cat), std::strerror(EIO)) << "cat";
      }
      EXPECT_EQ(describe(run(op_create(v_.path("ct_" + n + "/new")))), "ok");
      Outcome rm = run(op_unlink(v_.path("ct_" + n + "/file")));
      EXPECT_FALSE(rm.hung);
    }

    // The directory: never entered unless it is a directory with its IV; never followed.
    {
      EXPECT_EQ(describe(run(op_list(v_.path("dr_" + n)))), "ok");
      Outcome ls = run(op_list(v_.path("dr_" + n + "/sub")));
      EXPECT_FALSE(ls.hung);
      EXPECT_NE(ls.err, 0) << "ls of a directory replaced by a " << n << " listed:\n" << ls.out;
      Outcome cr = run(op_create(v_.path("dr_" + n + "/sub/new")));
      EXPECT_FALSE(cr.hung);
      EXPECT_NE(cr.err, 0) << "created a file in a directory replaced by a " << n;
      Outcome rm = run(t.shape == Shape::Directory ? op_rmdir(v_.path("dr_" + n + "/sub"))
                                                   : op_unlink(v_.path("dr_" + n + "/sub")));
      EXPECT_FALSE(rm.hung);
    }
  }

  // No worker is stuck: another directory still works, and the mount unmounts cleanly.
  Outcome ok = run(op_cat(v_.path("ok.txt")));
  EXPECT_EQ(describe(ok), "ok");
  EXPECT_EQ(ok.out, "still served\n");
  ASSERT_EQ(::mkdir(v_.path("later").c_str(), 0755), 0);
  EXPECT_EQ(describe(run(op_create(v_.path("later/x")))), "ok");
  EXPECT_EQ(snapshot(canary_), canary_before) << "something outside CIPHERDIR changed";
  const CommandResult um = run_shell(MountedVault::unmount_command(false) + shell_quote(v_.mountpoint()));
  EXPECT_EQ(um.status, 0) << "unmount: " << um.output;
}

// Many FIFOs planted as directory IVs, all listed at once: before the fix each one held a worker
// for good, and with all workers held, even a read of an unrelated file hung.
TEST_F(BackingShapes, ManyPlantedFifosDoNotFreezeTheMount) {
  constexpr int kDirs = 20;  // more than the daemon's 16 workers
  write_file(v_.path("unrelated.txt"), "unrelated\n");
  for (int i = 0; i < kDirs; ++i) ASSERT_EQ(::mkdir(v_.path("d" + std::to_string(i)).c_str(), 0755), 0);
  const auto by_ino = backing_by_inode(v_.cipherdir());
  std::vector<std::string> ivs;
  for (int i = 0; i < kDirs; ++i) ivs.push_back(backing("d" + std::to_string(i), by_ino) + "/gpucryptfs.diriv");
  v_.unmount();
  for (const auto& iv : ivs) {
    ASSERT_TRUE(fsys::remove(iv)) << iv;
    ASSERT_EQ(::mkfifo(iv.c_str(), 0644), 0);
  }
  const auto canary_before = snapshot(canary_);
  v_.mount();

  std::vector<Child> children;
  for (int i = 0; i < kDirs; ++i) children.push_back(start(op_list(v_.path("d" + std::to_string(i)))));
  const auto deadline = Clock::now() + kDeadline;
  Child unrelated = start(op_cat(v_.path("unrelated.txt")));
  for (int i = 0; i < kDirs; ++i)
    EXPECT_EQ(describe(finish(children[i], deadline)), std::strerror(EIO)) << "ls d" << i;
  Outcome cat = finish(unrelated, deadline + std::chrono::seconds(1));
  EXPECT_EQ(describe(cat), "ok") << "an unrelated file while FIFOs sit in other directories";
  EXPECT_EQ(cat.out, "unrelated\n");
  EXPECT_GE(count_occurrences(v_.log(), "gpucryptfs.diriv: cannot open the directory IV: is a FIFO"), kDirs) << v_.log();
  EXPECT_EQ(snapshot(canary_), canary_before);
  const CommandResult um = run_shell(MountedVault::unmount_command(false) + shell_quote(v_.mountpoint()));
  EXPECT_EQ(um.status, 0) << "unmount: " << um.output;
}

// Shapes swapped in while mounted, under names the daemon already knows: a content file replaced
// by a FIFO and a directory replaced by a link to the canary. Nothing blocks, nothing is written
// outside CIPHERDIR.
TEST_F(BackingShapes, ShapesSwappedWhileMountedNeverBlockOrLeave) {
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  write_file(v_.path("d/file"), "known\n");
  ASSERT_EQ(::mkdir(v_.path("d/sub").c_str(), 0755), 0);
  write_file(v_.path("d/sub/inner"), "inner\n");
  const auto by_ino = backing_by_inode(v_.cipherdir());
  const std::string file = backing("d/file", by_ino), sub = backing("d/sub", by_ino);
  ASSERT_FALSE(file.empty());
  ASSERT_FALSE(sub.empty());
  EXPECT_EQ(describe(run(op_cat(v_.path("d/file")))), "ok");  // known, and its descriptor cached
  EXPECT_EQ(describe(run(op_list(v_.path("d/sub")))), "ok");

  fsys::copy(sub, canary_ + "/sub", fsys::copy_options::recursive);
  ASSERT_TRUE(fsys::remove(file));
  ASSERT_EQ(::mkfifo(file.c_str(), 0644), 0);
  fsys::rename(sub, cipher_real_ + "/zz.moved");
  ASSERT_EQ(::symlink((canary_ + "/sub").c_str(), sub.c_str()), 0);
  const auto canary_before = snapshot(canary_);

  for (int round = 0; round < 2; ++round) {  // with the kernel's cached entries, then without
    SCOPED_TRACE(round == 0 ? "entries cached" : "entries expired");
    EXPECT_FALSE(run(op_cat(v_.path("d/file"))).hung);
    Outcome cr = run(op_create(v_.path("d/sub/new" + std::to_string(round))));
    EXPECT_FALSE(cr.hung);
    EXPECT_FALSE(run(op_list(v_.path("d/sub"))).hung);
    EXPECT_FALSE(run(op_stat(v_.path("d/sub/inner"))).hung);
    EXPECT_EQ(snapshot(canary_), canary_before) << "something outside CIPHERDIR changed";
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past the 1 s entry and attr timeouts
  }
  // Now known as what it is: a FIFO, opened by the kernel and not by the daemon.
  Outcome st = run(op_stat(v_.path("d/file")));
  EXPECT_EQ(describe(st), "ok");
  EXPECT_EQ(st.out, std::to_string(S_IFIFO));
  EXPECT_FALSE(run(op_cat(v_.path("d/file"))).hung);
  const CommandResult um = run_shell(MountedVault::unmount_command(false) + shell_quote(v_.mountpoint()));
  EXPECT_EQ(um.status, 0) << "unmount: " << um.output;
}

// rmdir of a directory that is empty in the plaintext view but whose IV is a directory: EIO
// (logged), not "Is a directory", and nothing inside the planted directory is removed.
TEST_F(BackingShapes, RmdirWithADirectoryAsItsIvIsEio) {
  ASSERT_EQ(::mkdir(v_.path("empty").c_str(), 0755), 0);
  const auto by_ino = backing_by_inode(v_.cipherdir());
  const std::string iv = backing("empty", by_ino) + "/gpucryptfs.diriv";
  v_.unmount();
  ASSERT_TRUE(fsys::remove(iv));
  ASSERT_EQ(::mkdir(iv.c_str(), 0755), 0);
  write_file(iv + "/kept", "kept\n");
  v_.mount();
  EXPECT_EQ(describe(run(op_rmdir(v_.path("empty")))), std::strerror(EIO));
  EXPECT_EQ(read_file(iv + "/kept"), "kept\n");
  EXPECT_TRUE(log_line_has(v_.log(), iv + ": ", "is a directory")) << v_.log();
}

// The root directory's IV is read by `mount` itself before serving: a FIFO there is a clear error
// at once, not a mount command that never returns.
TEST_F(BackingShapes, FifoAsTheRootIvFailsTheMountAtOnce) {
  v_.unmount();
  const std::string iv = v_.cipherdir() + "/gpucryptfs.diriv";
  ASSERT_TRUE(fsys::remove(iv));
  ASSERT_EQ(::mkfifo(iv.c_str(), 0644), 0);
  // Output to a file, not a pipe: a daemon left blocked by a regression must not keep us reading.
  const std::string out = canary_ + "/mount-output";
  CommandResult r = run_shell("timeout -s KILL 20 " + v_.mount_command() + " > " + shell_quote(out) + " 2>&1");
  r.output = read_file(out);
  // Releases a process that a regression left blocked in open() of the FIFO (it then reads EOF).
  for (int i = 0; r.status == 128 + SIGKILL && i < 20; ++i) {
    int w = ::open(iv.c_str(), O_WRONLY | O_NONBLOCK);  // ENXIO while nobody waits to read
    if (w >= 0) {
      ::close(w);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(r.status, 0) << "mounted with a FIFO as the root's IV";
  EXPECT_NE(r.status, 128 + SIGKILL) << "mount hung on the FIFO";
  EXPECT_NE(r.output.find("gpucryptfs.diriv"), std::string::npos) << r.output;
  EXPECT_TRUE(log_line_has(v_.log(), fsys::canonical(v_.cipherdir()).string() + "/gpucryptfs.diriv: ", "is a FIFO") ||
              log_line_has(v_.log(), v_.cipherdir() + "/gpucryptfs.diriv: ", "is a FIFO"))
      << v_.log();
  if (v_.in_mount_table()) run_shell(MountedVault::unmount_command(true) + shell_quote(v_.mountpoint()));
}

// FIFOs and device nodes made through the mount are stored as such and work: the kernel serves
// their opens itself and never sends them to the daemon, whose refusal to open anything but a
// regular file therefore never shows.
TEST_F(BackingShapes, FifosAndDevicesMadeThroughTheMountStillWork) {
  ASSERT_EQ(::mkfifo(v_.path("pipe").c_str(), 0600), 0);
  int fd = ::open(v_.path("pipe").c_str(), O_RDWR);  // O_RDWR: a FIFO open that never waits
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  char buf[3];
  ASSERT_EQ(::read(fd, buf, 3), 3);
  EXPECT_EQ(std::string(buf, 3), "abc");
  ::close(fd);
  if (can_mknod(canary_) && ::mknod(v_.path("zero").c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0) {
    Outcome cat = run([p = v_.path("zero")](int out) {
      int f = ::open(p.c_str(), O_RDONLY);
      if (f < 0) return errno;
      char b[8];
      ssize_t n = ::read(f, b, sizeof b);
      ::close(f);
      if (n != 8) return EIO;
      (void)!::write(out, b, 8);
      return 0;
    });
    // Opened by the kernel as the device it is (EACCES where the mount's filesystem is nodev).
    EXPECT_TRUE(cat.err == 0 || cat.err == EACCES) << describe(cat);
    if (cat.err == 0) {
      EXPECT_EQ(cat.out, std::string(8, '\0'));
    }
  }
  EXPECT_EQ(v_.log().find("regular content file belongs"), std::string::npos) << v_.log();
}

}  // namespace
}  // namespace gcfs::test
