// fsck on a deep tree of damage: thousands of directories nested in CIPHERDIR, each named "d" (a
// name that does not decrypt) and none holding a directory IV. Every level is a problem whose
// path holds every level above it; the check must still finish, report each level once, in
// order, with its full path, and --repair must move the top of the tree aside as a whole, all
// with a low limit on open descriptors (the walk keeps a bounded number, not one per level).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "fs/fsck/vault_check.h"
#include "tests/fault_support.h"

namespace gcfs {
namespace {

using testing::TempDir;
using testing::TestVault;

// Deeper than the walk keeps descriptors for (64 levels), so the way back up goes through "..".
constexpr int kDepth = 3000;

// `depth` directories `name` in `name` in ... beneath dirfd, made without paths (far too long).
void make_chain(int dirfd, const std::string& name, int depth) {
  int fd = ::dup(dirfd);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < depth; ++i) {
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0700), 0) << "level " << i << ": " << std::strerror(errno);
    const int sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(sub, 0);
    ::close(fd);
    fd = sub;
  }
  ::close(fd);
}

// Removes what make_chain made beneath dirfd (top: the name of its first level there), without
// paths and without recursion.
void remove_chain(int dirfd, const std::string& top, const std::string& name) {
  int fd = ::openat(dirfd, top.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  int depth = 1;
  for (int sub; (sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0; ++depth) {
    ::close(fd);
    fd = sub;
  }
  while (depth-- > 0) {
    const int up = ::openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    ::unlinkat(up, depth == 0 ? top.c_str() : name.c_str(), AT_REMOVEDIR);
    fd = up;
  }
  ::close(fd);
}

// Runs fsck with at most 256 open descriptors.
FsckReport fsck_with_few_descriptors(TestVault& v, bool repair) {
  struct rlimit old {};
  EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, 256);
  EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  FsckOptions o;
  o.repair = repair;
  FsckReport r = check_vault(v.vault(), v.engine(), o);
  ::setrlimit(RLIMIT_NOFILE, &old);
  return r;
}

// The problems of the tree, in the walk's order: the top's name does not decrypt, and each level
// lacks its directory IV, at "d/<IV>", "d/d/<IV>", ...
void expect_the_trees_problems(const FsckReport& r) {
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.directories, static_cast<std::uint64_t>(kDepth) + 1);
  ASSERT_EQ(r.problems.size(), static_cast<std::size_t>(kDepth) + 1);
  const FsckProblem& top = r.problems[0];
  EXPECT_EQ(top.cipher_path, "d");
  EXPECT_TRUE(top.plain_path.empty());
  EXPECT_TRUE(top.unreadable);
  EXPECT_TRUE(top.what.starts_with("name does not decrypt")) << top.what;
  std::string dir = "d";
  std::size_t unreadable = 0;
  for (int level = 1; level <= kDepth; ++level) {
    const FsckProblem& p = r.problems[static_cast<std::size_t>(level)];
    if (p.unreadable) ++unreadable;
    if (p.cipher_path != dir + "/" + kDirIvFileName || !p.plain_path.empty() ||
        !p.what.starts_with("directory IV missing: no name in this directory can be decrypted")) {
      ADD_FAILURE() << "level " << level << ": " << p.what.substr(0, 200) << " at " << p.cipher_path.substr(0, 200);
      return;
    }
    dir += "/d";
  }
  EXPECT_EQ(unreadable, 0u) << "only the top is unreadable as a whole";
}

TEST(FaultFsckDeep, ThreeThousandNestedUndecryptableDirectoriesAreReportedLevelByLevel) {
  TempDir tmp("gcfs-fsck-deep");
  TestVault v(tmp / "cipher");
  const int rootfd = ::open(v.dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(rootfd, 0);
  make_chain(rootfd, "d", kDepth);

  expect_the_trees_problems(fsck_with_few_descriptors(v, false));

  // --repair moves the top aside, the levels below with it, and reports the same problems.
  const FsckReport r = fsck_with_few_descriptors(v, true);
  expect_the_trees_problems(r);
  ASSERT_FALSE(r.problems.empty());
  const std::string moved = r.problems[0].moved_to;
  EXPECT_EQ(moved, std::string(kLostFoundDirName) + "/1-d");
  for (std::size_t i = 1; i < r.problems.size(); ++i)
    EXPECT_TRUE(r.problems[i].moved_to.empty()) << "level " << i << " moved on its own";
  EXPECT_NE(::faccessat(rootfd, "d", F_OK, AT_SYMLINK_NOFOLLOW), 0) << "the tree is still in place";

  remove_chain(rootfd, moved, "d");
  remove_chain(rootfd, "d", "d");
  ::close(rootfd);
}

}  // namespace
}  // namespace gcfs
