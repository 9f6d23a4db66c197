// The daemon holds descriptors only for directories; other files are found again by their
// remembered name (parent directory and ciphertext entry) once their cached descriptor was
// evicted. These tests mount with a low descriptor limit, so the cache is small and every
// operation meets files whose descriptors are gone: trees far larger than the limit, renames
// (RENAME_EXCHANGE included), hard links, files unlinked while open, many threads at once, and
// CIPHERDIR changed behind the daemon's back.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

// A limit of twice what the daemon holds after starting with the engine under test plus 48
// (low_descriptor_limit): its caches of descriptors get a quarter of what is free at start (about
// 15 each with the cpu engine, 28 with two GPUs over io_uring on 16 CPUs, 60 on 32 CPUs, whose
// rings hold more), so the fillers outnumber the cache the log names, whatever the engine and the
// machine.
VaultOptions low_limit() {
  VaultOptions o;
  o.shell_prefix = low_descriptor_limit(48);
  return o;
}

// An absolute limit, for a tree far larger than it.
VaultOptions fixed_limit(int limit) {
  VaultOptions o;
  o.shell_prefix = "ulimit -n " + std::to_string(limit) + " && ";
  return o;
}

ino_t ino_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// The inode numbers of everything the daemon holds a descriptor of.
std::set<ino_t> daemon_fd_inodes(pid_t pid) {
  auto r = run_shell("for f in /proc/" + std::to_string(pid) + "/fd/*; do stat -L -c %i \"$f\" 2>/dev/null; done");
  std::set<ino_t> out;
  std::size_t pos = 0;
  while (pos < r.output.size()) {
    std::size_t end = r.output.find('\n', pos);
    if (end == std::string::npos) end = r.output.size();
    if (end > pos) out.insert(static_cast<ino_t>(std::stoull(r.output.substr(pos, end - pos))));
    pos = end + 1;
  }
  return out;
}

// The size of the daemon's cache of descriptors for files other than directories, from its log
// line "descriptors: ... a cache of at most N for other files"; 0 where the log does not say.
int file_cache_size(const std::string& log) {
  const std::string tail = " for other files";
  const std::size_t end = log.find(tail);
  if (end == std::string::npos) return 0;
  std::size_t start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(log[start - 1]))) --start;
  return start < end ? std::stoi(log.substr(start, end - start)) : 0;
}

class FdCache : public ::testing::Test {
 protected:
  FdCache() : v_(low_limit()) {
    const int fillers = std::max(kFillers, file_cache_size(v_.log()) + 8);
    for (int i = 0; i < fillers; ++i) write_file(v_.path("filler" + std::to_string(i)), std::to_string(i));
  }
  // Opens more other files than the cache holds, so the descriptors of the files under test are
  // evicted, and checks that they are: the daemon holds no descriptor of any of paths.
  void evict(const std::vector<std::string>& paths) {
    auto r = v_.sh("cat filler* > /dev/null");
    ASSERT_EQ(r.status, 0) << r.output;
    const auto held = daemon_fd_inodes(v_.daemon_pid());
    for (const auto& p : paths) {
      const ino_t ino = ino_of(v_.path(p));
      ASSERT_NE(ino, 0u) << p;
      EXPECT_EQ(held.count(ino), 0u) << p << " still has a descriptor in the daemon";
    }
  }
  static constexpr int kFillers = 40;
  MountedVault v_;
};

TEST(FdCacheTree, ManyMoreFilesThanTheDescriptorLimit) {
  GCFS_REQUIRE_PROGRAM("tar");
  // 5,000 files (and symlinks and hard links) in 5 directories against a hard limit of 1,024: the
  // kernel remembers every one of them, the daemon cannot hold a descriptor for each.
  TempDir src("gcfs-tree");
  auto made = run_shell(
      "mkdir tree && cd tree && for d in 1 2 3 4 5; do mkdir d$d; for f in $(seq 1000); do echo \"$d/$f\" > d$d/f$f; "
      "done; done && for i in $(seq 50); do ln -s ../d1/f$i d2/l$i; ln d3/f$i d4/h$i; done && cd .. && "
      "tar cf tree.tar tree",
      src.path());
  ASSERT_EQ(made.status, 0) << made.output;
  MountedVault v(fixed_limit(1024));
  const std::string tar = shell_quote(src.path() + "/tree.tar");
  auto untar = v.sh("tar xf " + tar);
  ASSERT_EQ(untar.status, 0) << untar.output.substr(0, 2000);
  // tar d reads every file back and compares contents, sizes, modes, times and link targets.
  auto diff = v.sh("tar df " + tar);
  EXPECT_EQ(diff.status, 0) << diff.output.substr(0, 2000);
  auto listed = v.sh("ls -lR tree | grep -c '^-'; ls -lR tree | grep -c '^l'");
  EXPECT_EQ(listed.status, 0) << listed.output.substr(0, 2000);
  EXPECT_EQ(listed.output, "5050\n50\n");
  auto contents = v.sh("cat tree/d*/f* | sort | uniq | wc -l; cat tree/d2/l7 tree/d4/h9");
  EXPECT_EQ(contents.output, "5000\n1/7\n3/9\n");
  auto stats = v.sh("find tree -type f | xargs stat -c %s | sort -u | wc -l");
  EXPECT_EQ(stats.status, 0) << stats.output;
  EXPECT_LT(daemon_fd_inodes(v.daemon_pid()).size(), 1024u);
  auto removed = v.sh("rm -rf tree && ls -A | wc -l");
  EXPECT_EQ(removed.output, "0\n");
  EXPECT_EQ(v.log().find("out of file descriptors"), std::string::npos) << v.log();
  EXPECT_EQ(v.log().find("behind the daemon's back"), std::string::npos) << v.log();
  // A quarter of the 1,024 less the few descriptors open when the daemon starts serving.
  EXPECT_NE(v.log().find(" for other files (limit 1024)"), std::string::npos) << v.log();
  EXPECT_EQ(v.log().find("a cache of at most 256 for other files"), std::string::npos)
      << "the caches must leave room for what is open already: " << v.log();
}

TEST_F(FdCache, RenamesOfEvictedFiles) {
  write_file(v_.path("a"), "content of a");
  write_file(v_.path("b"), "content of b");
  write_file(v_.path("c"), "content of c");
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  write_file(v_.path("d/x"), "content of x");
  write_file(v_.path("d/y"), "content of y");
  ASSERT_EQ(::mkdir(v_.path("e").c_str(), 0755), 0);
  evict({"a", "b", "c", "d/x", "d/y"});

  ASSERT_EQ(::rename(v_.path("a").c_str(), v_.path("e/a2").c_str()), 0) << std::strerror(errno);
  evict({"e/a2", "b", "c", "d/x", "d/y"});
  EXPECT_EQ(read_file(v_.path("e/a2")), "content of a");

  ASSERT_EQ(::rename(v_.path("d").c_str(), v_.path("e/d2").c_str()), 0) << std::strerror(errno);
  evict({"e/a2", "b", "c", "e/d2/x", "e/d2/y"});
  EXPECT_EQ(read_file(v_.path("e/d2/x")), "content of x");

  ASSERT_EQ(::renameat2(AT_FDCWD, v_.path("b").c_str(), AT_FDCWD, v_.path("c").c_str(), RENAME_EXCHANGE), 0)
      << std::strerror(errno);
  evict({"e/a2", "b", "c", "e/d2/x", "e/d2/y"});
  // A rename that replaces an evicted file.
  write_file(v_.path("e/d2/z"), "content of z");
  evict({"e/d2/z", "e/d2/y"});
  ASSERT_EQ(::rename(v_.path("e/d2/z").c_str(), v_.path("e/d2/y").c_str()), 0);
  evict({"e/a2", "b", "c", "e/d2/x", "e/d2/y"});

  // Attributes and xattrs go through the daemon's descriptors too.
  EXPECT_EQ(::chmod(v_.path("b").c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_EQ(::setxattr(v_.path("c").c_str(), "user.k", "v", 1, 0), 0) << std::strerror(errno);
  evict({"e/a2", "b", "c", "e/d2/x", "e/d2/y"});
  auto check = [&] {
    EXPECT_EQ(read_file(v_.path("e/a2")), "content of a");
    EXPECT_EQ(read_file(v_.path("b")), "content of c");
    EXPECT_EQ(read_file(v_.path("c")), "content of b");
    EXPECT_EQ(read_file(v_.path("e/d2/x")), "content of x");
    EXPECT_EQ(read_file(v_.path("e/d2/y")), "content of z");
    char buf[8];
    EXPECT_EQ(::getxattr(v_.path("c").c_str(), "user.k", buf, sizeof buf), 1) << std::strerror(errno);
    struct stat st {};
    ASSERT_EQ(::stat(v_.path("b").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  };
  check();
  v_.remount();
  check();
  EXPECT_EQ(v_.log().find("behind the daemon's back"), std::string::npos) << v_.log();
}

TEST_F(FdCache, HardLinksAndUnlinkedOpenFiles) {
  write_file(v_.path("first"), "linked");
  ASSERT_EQ(::link(v_.path("first").c_str(), v_.path("second").c_str()), 0) << std::strerror(errno);
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  ASSERT_EQ(::link(v_.path("second").c_str(), v_.path("d/third").c_str()), 0) << std::strerror(errno);
  evict({"first", "second", "d/third"});
  ASSERT_EQ(::unlink(v_.path("first").c_str()), 0);
  evict({"second", "d/third"});
  EXPECT_EQ(read_file(v_.path("second")), "linked");
  ASSERT_EQ(::unlink(v_.path("second").c_str()), 0);
  evict({"d/third"});
  EXPECT_EQ(read_file(v_.path("d/third")), "linked");
  EXPECT_EQ(::chmod(v_.path("d/third").c_str(), 0640), 0) << std::strerror(errno);
  struct stat st {};
  ASSERT_EQ(::stat(v_.path("d/third").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(st.st_mode & 07777, 0640u);

  // Unlinked while open: the handle keeps working, through its open descriptor.
  const std::string p = v_.path("open-then-unlinked");
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "hello", 5, 0), 5);
  ASSERT_EQ(::unlink(p.c_str()), 0);
  evict({});
  ASSERT_EQ(::pwrite(fd, " world", 6, 5), 6);
  ASSERT_EQ(::fsync(fd), 0);
  char buf[32] = {};
  ASSERT_EQ(::pread(fd, buf, sizeof buf, 0), 11);
  EXPECT_STREQ(buf, "hello world");
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 11);
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(::fchmod(fd, 0600), 0) << std::strerror(errno);
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ::close(fd);
  // A new file may get the unlinked one's number: it must be a file of its own.
  write_file(v_.path("new"), "new file");
  EXPECT_EQ(read_file(v_.path("new")), "new file");
  EXPECT_EQ(read_file(v_.path("d/third")), "linked");
  EXPECT_EQ(v_.log().find("behind the daemon's back"), std::string::npos) << v_.log();
}

TEST_F(FdCache, CiphertextChangedBehindTheDaemon) {
  write_file(v_.path("a"), "content of a");
  write_file(v_.path("b"), "content of b");
  write_file(v_.path("c"), "content of c");
  // Handles on the inodes themselves (O_PATH: no open reaches the daemon), used after the change.
  int fa = ::open(v_.path("a").c_str(), O_PATH);
  int fc = ::open(v_.path("c").c_str(), O_PATH);
  ASSERT_GE(fa, 0);
  ASSERT_GE(fc, 0);
  evict({"a", "b", "c"});
  auto cipher_of = [&](const std::string& name) {
    auto r = run_shell("find " + shell_quote(v_.cipherdir()) + " -maxdepth 1 -inum " +
                       std::to_string(ino_of(v_.path(name))) + " -printf %f");
    return r.output;
  };
  const std::string ca = cipher_of("a"), cb = cipher_of("b"), cc = cipher_of("c");
  ASSERT_FALSE(ca.empty());
  ASSERT_FALSE(cb.empty());
  ASSERT_FALSE(cc.empty());
  // a and b swap names in CIPHERDIR; c is renamed to a name that does not decrypt.
  // (Names are base64url and may start with '-': hence the "--".)
  auto r = run_shell("mv -- " + shell_quote(ca) + " tmp && mv -- " + shell_quote(cb) + " " + shell_quote(ca) +
                         " && mv -- tmp " + shell_quote(cb) + " && mv -- " + shell_quote(cc) + " moved-away",
                     v_.cipherdir());
  ASSERT_EQ(r.status, 0) << r.output;
  ::usleep(1'200'000);  // past the kernel's attribute timeout: the next fstat asks the daemon

  struct stat st {};
  errno = 0;
  EXPECT_NE(::fstat(fa, &st), 0);
  EXPECT_TRUE(errno == ESTALE || errno == ENOENT) << std::strerror(errno);
  errno = 0;
  EXPECT_NE(::fstat(fc, &st), 0);
  EXPECT_TRUE(errno == ESTALE || errno == ENOENT) << std::strerror(errno);
  // Opening the inode the kernel knows as a must not give b's contents.
  const std::string via_fd = "/proc/self/fd/" + std::to_string(fa);
  int fd = ::open(via_fd.c_str(), O_RDONLY);
  if (fd >= 0) {
    char buf[32] = {};
    ssize_t n = ::read(fd, buf, sizeof buf);
    ADD_FAILURE() << "opened a stale inode; read " << n << " bytes: " << buf;
    ::close(fd);
  } else {
    EXPECT_TRUE(errno == ESTALE || errno == ENOENT) << std::strerror(errno);
  }
  ::close(fa);
  ::close(fc);
  const std::string log = v_.log();
  EXPECT_NE(log.find("behind the daemon's back"), std::string::npos) << log;
  EXPECT_NE(log.find(v_.cipherdir() + "/" + ca + ": now another file"), std::string::npos) << log;
  EXPECT_NE(log.find(v_.cipherdir() + "/" + cc + ": gone"), std::string::npos) << log;
  // The daemon is still serving.
  write_file(v_.path("after"), "still here");
  EXPECT_EQ(read_file(v_.path("after")), "still here");
}

// Many threads on more files than the cache holds, with renames of the same inodes under way:
// descriptors are evicted, reopened and pinned concurrently (run under TSan by
// scripts/sanitize.sh thread).
TEST_F(FdCache, ConcurrentCallsWhileFilesAreRenamedAndEvicted) {
  constexpr int kThreads = 4, kPerThread = 12, kRounds = 60;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kPerThread; ++i) {
      const std::string p = v_.path("t" + std::to_string(t) + "_" + std::to_string(i));
      write_file(p, "file " + std::to_string(t) + "/" + std::to_string(i));
      ASSERT_EQ(::setxattr(p.c_str(), "user.k", "v", 1, 0), 0) << std::strerror(errno);
    }
  // Handles on the inodes for a reader that uses them whatever their names are at the moment.
  // Opened before the workers start renaming: a name that is momentarily moved away would give
  // no handle (that, not the daemon, was this test's rare failure under TSan).
  std::vector<int> handles;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kPerThread; ++i) {
      handles.push_back(::open(v_.path("t" + std::to_string(t) + "_" + std::to_string(i)).c_str(), O_PATH));
      ASSERT_GE(handles.back(), 0) << std::strerror(errno);
    }
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  // Workers: open, read and check, chmod, rename away and back.
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kPerThread; ++i) {
          const std::string name = "t" + std::to_string(t) + "_" + std::to_string(i);
          const std::string p = v_.path(name), q = v_.path(name + ".moved");
          if (read_file(p) != "file " + std::to_string(t) + "/" + std::to_string(i)) ++failures;
          if (::chmod(p.c_str(), round % 2 ? 0600 : 0644) != 0) ++failures;
          if (::rename(p.c_str(), q.c_str()) != 0 || ::rename(q.c_str(), p.c_str()) != 0) ++failures;
        }
      }
    });
  }
  std::atomic<int> xattr_failures{0};
  std::string xattr_errors;  // the reader's alone until it is joined
  std::thread reader([&] {
    char buf[8];
    while (!done) {
      for (int h : handles) {
        const std::string p = "/proc/self/fd/" + std::to_string(h);
        if (::getxattr(p.c_str(), "user.k", buf, sizeof buf) != 1) {
          if (++xattr_failures <= 3) xattr_errors += std::string(std::strerror(errno)) + "; ";
        }
      }
    }
  });
  for (auto& th : threads) th.join();
  done = true;
  reader.join();
  for (int h : handles) ::close(h);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(xattr_failures.load(), 0) << xattr_errors << v_.log();
  EXPECT_EQ(v_.log().find("behind the daemon's back"), std::string::npos) << v_.log();
  EXPECT_EQ(v_.log().find("out of file descriptors"), std::string::npos) << v_.log();
}

// Directories are cached like other files (13 or fewer at this limit) and opened again by name from their
// parent beyond that: renames of evicted directories, nested ones included, and many threads
// renaming directories while others read the files inside them.
TEST_F(FdCache, DirectoriesRenamedWhileEvicted) {
  constexpr int kDirs = 40;
  for (int i = 0; i < kDirs; ++i) {
    const std::string d = v_.path("dir" + std::to_string(i));
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << std::strerror(errno);
    ASSERT_EQ(::mkdir((d + "/inner").c_str(), 0755), 0) << std::strerror(errno);
    write_file(d + "/inner/f", "in " + std::to_string(i));
  }
  auto list_all = [&] { return v_.sh("ls -R . > /dev/null").status; };
  ASSERT_EQ(list_all(), 0);
  // Move every odd directory into the even one before it, then list everything (evicting).
  for (int i = 1; i < kDirs; i += 2)
    ASSERT_EQ(::rename(v_.path("dir" + std::to_string(i)).c_str(),
                       v_.path("dir" + std::to_string(i - 1) + "/moved").c_str()),
              0)
        << std::strerror(errno);
  ASSERT_EQ(list_all(), 0);
  for (int i = 0; i < kDirs; ++i) {
    const std::string where =
        i % 2 ? "dir" + std::to_string(i - 1) + "/moved/inner/f" : "dir" + std::to_string(i) + "/inner/f";
    EXPECT_EQ(read_file(v_.path(where)), "in " + std::to_string(i)) << where;
  }

  // Threads rename their directories away and back while readers read the files inside.
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 30; ++round)
        for (int i = t * 2; i < kDirs; i += 8) {
          const std::string a = v_.path("dir" + std::to_string(i)), b = a + ".away";
          if (::rename(a.c_str(), b.c_str()) != 0 || ::rename(b.c_str(), a.c_str()) != 0) ++failures;
        }
    });
  std::thread reader([&] {
    while (!done)
      for (int i = 0; i < kDirs; i += 2) {
        const std::string f = v_.path("dir" + std::to_string(i) + "/inner/f");
        int fd = ::open(f.c_str(), O_RDONLY);
        if (fd < 0) continue;  // renamed away at that moment: fine
        char buf[16] = {};
        if (::read(fd, buf, sizeof buf) <= 0 || std::string(buf) != "in " + std::to_string(i)) ++failures;
        ::close(fd);
      }
  });
  for (auto& th : threads) th.join();
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_EQ(list_all(), 0);
  EXPECT_EQ(read_file(v_.path("dir38/moved/inner/f")), "in 39");
  // What it held at start and its two caches, each a quarter of what was free then.
  const int at_start = daemon_descriptors_after_start();
  EXPECT_LE(daemon_fd_inodes(v_.daemon_pid()).size(),
            static_cast<std::size_t>(at_start + (low_descriptor_limit_value(48) - at_start) / 2));
  v_.remount();
  EXPECT_EQ(read_file(v_.path("dir0/moved/inner/f")), "in 1");
  EXPECT_EQ(v_.log().find("behind the daemon's back"), std::string::npos) << v_.log();
  EXPECT_EQ(v_.log().find("out of file descriptors"), std::string::npos) << v_.log();
}

// A lookup of a directory the daemon knows, whose descriptor it holds, costs one fstatat: the
// number that fstatat gives decides whether it is that directory. A directory replaced behind the
// daemon's back (another directory under its ciphertext name, here a copy of it made before a
// change through the mount) is a new number: it is opened and served as what it is now, and
// files in it are removed and the directory itself too, IV and all.
TEST_F(FdCache, DirectoryReplacedBehindTheDaemonIsLookedUpAfresh) {
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  write_file(v_.path("d/f"), "before");
  ASSERT_EQ(v_.sh("ls -l d > /dev/null").status, 0);  // known, with its descriptor cached
  auto r = run_shell("find " + shell_quote(v_.cipherdir()) + " -maxdepth 1 -inum " +
                     std::to_string(ino_of(v_.path("d"))) + " -printf %f");
  const std::string cd = r.output;
  ASSERT_FALSE(cd.empty());
  r = run_shell("cp -a -- " + shell_quote(cd) + " copy", v_.cipherdir());
  ASSERT_EQ(r.status, 0) << r.output;
  write_file(v_.path("d/f"), "after, in the directory that goes");
  write_file(v_.path("d/g"), "only in the directory that goes");
  r = run_shell("rm -rf -- " + shell_quote(cd) + " && mv -- copy " + shell_quote(cd), v_.cipherdir());
  ASSERT_EQ(r.status, 0) << r.output;
  ::usleep(1'200'000);  // past the kernel's entry timeout: the next use of d looks it up again

  EXPECT_EQ(read_file(v_.path("d/f")), "before");
  EXPECT_EQ(v_.sh("ls d").output, "f\n");
  struct stat st {};
  EXPECT_NE(::stat(v_.path("d/g").c_str(), &st), 0);
  EXPECT_EQ(::unlink(v_.path("d/f").c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(::rmdir(v_.path("d").c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(run_shell("ls -A", v_.cipherdir()).output.find(cd), std::string::npos);
  // A new directory under the same name starts empty, and listing and removing work there.
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  write_file(v_.path("d/h"), "new");
  EXPECT_EQ(v_.sh("ls d").output, "h\n");
  EXPECT_EQ(v_.sh("rm -r d").status, 0);
  EXPECT_NE(::stat(v_.path("d").c_str(), &st), 0);
}

// Each file removed through the mount while the kernel still holds its inode keeps a descriptor,
// so that a stat through a handle of it still answers, until the kernel forgets it. Those are
// bounded like the caches: a hundred held and removed files, under a limit that cannot hold a
// hundred more descriptors, leave the daemon the descriptors it needs for everything else, and
// each handle answers with the removed file's attributes or ESTALE, never anything else.
TEST_F(FdCache, DescriptorsKeptForRemovedFilesAreBounded) {
  constexpr int kFiles = 100;
  std::vector<int> handles;
  for (int i = 0; i < kFiles; ++i) {
    const std::string f = v_.path("removed" + std::to_string(i));
    write_file(f, "removed " + std::to_string(i));
    const int h = ::open(f.c_str(), O_PATH);
    ASSERT_GE(h, 0) << std::strerror(errno);
    handles.push_back(h);
  }
  for (int i = 0; i < kFiles; ++i)
    ASSERT_EQ(::unlink(v_.path("removed" + std::to_string(i)).c_str()), 0) << i << ": " << std::strerror(errno);
  ::usleep(1'200'000);  // past the attribute timeout: each fstat below asks the daemon
  int answered = 0;
  for (int h : handles) {
    struct stat st {};
    if (::fstat(h, &st) == 0) {
      EXPECT_EQ(st.st_nlink, 0u);
      ++answered;
    } else {
      EXPECT_EQ(errno, ESTALE) << std::strerror(errno);
    }
  }
  EXPECT_GT(answered, 0);
  // The daemon still has descriptors for new work.
  ASSERT_EQ(::mkdir(v_.path("after").c_str(), 0755), 0) << std::strerror(errno);
  write_file(v_.path("after/new"), "new file");
  EXPECT_EQ(read_file(v_.path("after/new")), "new file");
  EXPECT_EQ(v_.sh("ls after").output, "new\n");
  for (int h : handles) ::close(h);
  EXPECT_EQ(v_.log().find("out of file descriptors"), std::string::npos) << v_.log();
}

}  // namespace
}  // namespace gcfs::test
