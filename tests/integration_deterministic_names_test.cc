// init --deterministic-names: no per-directory IV files, so the same name encrypts the same in
// every directory (nothing per directory for a sync client to conflict on); info says so; fsck
// is clean without IV files and reports a stray one; a re-key keeps the vault deterministic; a
// default vault is unchanged.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

class DeterministicNames : public ::testing::Test {
 protected:
  DeterministicNames() : root_("gcfs-detn") {
    cipher_ = root_.path() + "/cipher";
    plain_ = root_.path() + "/plain";
    pass_ = root_.path() + "/pass";
    ::mkdir(cipher_.c_str(), 0700);
    ::mkdir(plain_.c_str(), 0700);
    write_file(pass_, "pw\n");
    ::chmod(pass_.c_str(), 0600);
  }
  ~DeterministicNames() override { run_shell("fusermount3 -u " + q(plain_) + " 2>/dev/null"); }
  static std::string q(const std::string& s) { return shell_quote(s); }
  CommandResult init(const std::string& extra) {
    return run_shell(test_binary() + " init -q --scrypt-logn 10 --passfile " + q(pass_) + " " + extra + " " + q(cipher_));
  }
  CommandResult mount() {
    return run_shell(test_binary() + " mount --engine " + test_engine() + transport_arg() + " --passfile " + q(pass_) +
                     " --log " + q(root_.path() + "/log") + " " + q(cipher_) + " " + q(plain_));
  }
  void unmount() { ASSERT_EQ(run_shell("fusermount3 -u " + q(plain_)).status, 0); }
  CommandResult fsck() { return run_shell(test_binary() + " fsck --passfile " + q(pass_) + " " + q(cipher_)); }
  int iv_files() {
    return std::stoi(run_shell("find . -name 'gpucryptfs.diriv*' | wc -l", cipher_).output);
  }
  // Writes the tree: the same name in two directories, deep folders, a long name, a rename.
  void write_tree() {
    const CommandResult w = run_shell(
        "set -e; mkdir -p a/b/c x; printf one > a/same; printf two > x/same; printf deep > a/b/c/leaf; "
        "printf long > a/" + std::string(200, 'n') + "; printf moved > x/m; mv x/m a/b/moved",
        plain_);
    ASSERT_EQ(w.status, 0) << w.output;
  }
  void expect_tree() {
    EXPECT_EQ(read_file(plain_ + "/a/same"), "one");
    EXPECT_EQ(read_file(plain_ + "/x/same"), "two");
    EXPECT_EQ(read_file(plain_ + "/a/b/c/leaf"), "deep");
    EXPECT_EQ(read_file(plain_ + "/a/" + std::string(200, 'n')), "long");
    EXPECT_EQ(read_file(plain_ + "/a/b/moved"), "moved");
  }
  TempDir root_;
  std::string cipher_, plain_, pass_;
};

TEST_F(DeterministicNames, NoIvFilesAndEqualNamesEncryptEquallyInEveryDirectory) {
  ASSERT_EQ(init("--deterministic-names").status, 0);
  const CommandResult info = run_shell(test_binary() + " info " + q(cipher_));
  EXPECT_NE(info.output.find("deterministic"), std::string::npos) << info.output;
  ASSERT_EQ(mount().status, 0);
  write_tree();
  unmount();
  EXPECT_EQ(iv_files(), 0);
  // a/same and x/same: one backing name, found in both directories (the only name repeated).
  const CommandResult names = run_shell(
      "for d in */; do find \"$d\" -maxdepth 1 -type f -size -200c ! -name 'gpucryptfs*' ! -name '*.name' -printf '%f\\n'; done | sort | uniq -d",
      cipher_);
  EXPECT_EQ(std::count(names.output.begin(), names.output.end(), '\n'), 1) << names.output;
  ASSERT_EQ(mount().status, 0);
  expect_tree();
  unmount();
  const CommandResult f = fsck();
  EXPECT_EQ(f.status, 0) << f.output;
}

TEST_F(DeterministicNames, AStrayIvFileIsReportedAndNamesStillRead) {
  ASSERT_EQ(init("--deterministic-names").status, 0);
  ASSERT_EQ(mount().status, 0);
  write_tree();
  unmount();
  write_file(cipher_ + "/gpucryptfs.diriv", std::string(16, 'z'));
  const CommandResult f = fsck();
  EXPECT_NE(f.status, 0) << f.output;
  EXPECT_NE(f.output.find("gpucryptfs.diriv"), std::string::npos) << f.output;
  ASSERT_EQ(mount().status, 0);
  expect_tree();
  unmount();
}

TEST_F(DeterministicNames, AReKeyKeepsItDeterministicAndADefaultVaultKeepsItsIvFiles) {
  ASSERT_EQ(init("--deterministic-names").status, 0);
  ASSERT_EQ(mount().status, 0);
  write_tree();
  unmount();
  const CommandResult r = run_shell(test_binary() + " rekey -q --engine " + test_engine() + " --passfile " + q(pass_) + " " +
                                    q(cipher_) + " </dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(iv_files(), 0);
  EXPECT_NE(run_shell(test_binary() + " info " + q(cipher_)).output.find("deterministic"), std::string::npos);
  ASSERT_EQ(mount().status, 0);
  expect_tree();
  ASSERT_EQ(::mkdir((plain_ + "/after").c_str(), 0700), 0);
  unmount();
  EXPECT_EQ(iv_files(), 0);
  EXPECT_EQ(fsck().status, 0);
  // The default: an IV file per directory, as before.
  run_shell("rm -rf " + q(cipher_) + " && mkdir " + q(cipher_));
  ASSERT_EQ(init("").status, 0);
  ASSERT_EQ(mount().status, 0);
  write_tree();
  unmount();
  EXPECT_EQ(iv_files(), 5);  // the root, a, a/b, a/b/c and x
}

}  // namespace
}  // namespace gcfs::test
