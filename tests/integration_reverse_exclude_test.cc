// mount --reverse with --exclude, --exclude-wildcard (-ew) and --exclude-from (-ef): what is
// excluded is absent from the view (not listed, not found, nothing of a long name's .name file),
// a copy of the view mounts as a vault holding exactly the rest, and the control socket maps the
// rest and refuses what is excluded.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "support/ctl_client.h"
#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

class ReverseExclude : public ::testing::Test {
 protected:
  ReverseExclude() : root_("gcfs-rexcl") {
    plain_ = root_.path() + "/plain";
    view_ = root_.path() + "/view";
    copy_ = root_.path() + "/copy";
    fwd_ = root_.path() + "/fwd";
    pass_ = root_.path() + "/pass";
    for (const auto& d : {plain_, view_, copy_, fwd_}) ::mkdir(d.c_str(), 0700);
    write_file(pass_, "reverse password\n");
    ::chmod(pass_.c_str(), 0600);
  }
  ~ReverseExclude() override {
    for (const auto& m : {view_, fwd_}) run_shell("fusermount3 -u " + q(m) + " 2>/dev/null || fusermount3 -uz " + q(m) + " 2>/dev/null");
  }
  static std::string q(const std::string& s) { return shell_quote(s); }
  CommandResult mount_view(const std::string& extra) {
    return run_shell(test_binary() + " mount --reverse --engine " + test_engine() + transport_arg() + " --log " +
                     q(root_.path() + "/log") + " --passfile " + q(pass_) + " " + extra + " " + q(plain_) + " " + q(view_));
  }
  std::string tree(const std::string& dir) {
    return run_shell("find . -mindepth 1 | sort", dir).output;
  }
  TempDir root_;
  std::string plain_, view_, copy_, fwd_, pass_;
};

TEST_F(ReverseExclude, ExcludedPathsAreAbsentAndTheCopyHoldsExactlyTheRest) {
  for (const auto& d : {"secret", "secret/inner", "sub", "sub/build", "build", "docs"})
    ASSERT_EQ(::mkdir((plain_ + "/" + d).c_str(), 0700), 0);
  for (const auto& f : {"keep.txt", "secret/key", "secret/inner/deeper", "a.tmp", "sub/b.tmp", "sub/important.tmp",
                        "sub/build/out.o", "docs/notes", "docs/draft"})
    write_file(plain_ + "/" + f, std::string("content of ") + f);
  write_file(plain_ + "/" + std::string(200, 'X') + ".tmp", "long and excluded");
  write_file(plain_ + "/" + std::string(200, 'K'), "long and kept");
  write_file(root_.path() + "/excludes", "# build output\nbuild/\n\n!important.tmp\n/docs/draft\n");
  ASSERT_EQ(run_shell(test_binary() + " init --reverse --scrypt-logn 10 --passfile " + q(pass_) + " " + q(plain_)).status, 0);
  // gocryptfs's spellings: one dash, and -ew / -ef.
  auto r = mount_view("-exclude=/secret -ew '*.tmp' -ef " + q(root_.path() + "/excludes") + " -ctlsock " +
                      q(root_.path() + "/ctl"));
  ASSERT_EQ(r.status, 0) << r.output;
  // The root shows the config, the IV, and four entries: keep.txt, sub, docs, the long kept name
  // (with its .name file); nothing of the long excluded name.
  r = run_shell("ls -A | sort", view_);
  std::size_t names = 0, name_files = 0;
  std::istringstream in(r.output);
  for (std::string e; std::getline(in, e);) {
    if (e.starts_with("gpucryptfs.")) continue;
    (e.ends_with(".name") ? name_files : names)++;
  }
  EXPECT_EQ(names, 4u) << r.output;
  EXPECT_EQ(name_files, 1u) << r.output;

  // The control socket maps what is shown and refuses what is excluded.
  Client c(root_.path() + "/ctl");
  ASSERT_TRUE(c.connected());
  auto kept = c.encrypt("sub/important.tmp");
  ASSERT_EQ(kept["ErrNo"], 0) << kept;
  EXPECT_EQ(c.decrypt(kept["Result"])["Result"], "sub/important.tmp");
  for (const char* gone : {"secret", "secret/key", "a.tmp", "sub/b.tmp", "build", "sub/build/out.o", "docs/draft"})
    EXPECT_EQ(c.encrypt(gone)["ErrNo"], ENOENT) << gone;
  EXPECT_EQ(c.decrypt("gpucryptfs.diriv")["ErrNo"], EINVAL) << "the view's own files have no plaintext path";

  ASSERT_EQ(run_shell("cp -a " + q(view_) + "/. " + q(copy_)).status, 0);
  ASSERT_EQ(run_shell("fusermount3 -u " + q(view_)).status, 0);
  r = run_shell(test_binary() + " mount --read-only --engine " + test_engine() + transport_arg() + " --log " +
                q(root_.path() + "/log") + " --passfile " + q(pass_) + " " + q(copy_) + " " + q(fwd_));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(tree(fwd_), "./" + std::string(200, 'K') + "\n./docs\n./docs/notes\n./keep.txt\n./sub\n./sub/important.tmp\n");
  EXPECT_EQ(read_file(fwd_ + "/sub/important.tmp"), "content of sub/important.tmp");
  EXPECT_EQ(read_file(fwd_ + "/" + std::string(200, 'K')), "long and kept");
  ASSERT_EQ(run_shell("fusermount3 -u " + q(fwd_)).status, 0);
  r = run_shell(test_binary() + " fsck --passfile " + q(pass_) + " " + q(copy_));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(ReverseExclude, ExcludeOptionsAreForReverseOnlyAndAMissingFileIsRefused) {
  ASSERT_EQ(run_shell(test_binary() + " init --reverse --scrypt-logn 10 --passfile " + q(pass_) + " " + q(plain_)).status, 0);
  auto r = mount_view("-ef " + q(root_.path() + "/no-such-file"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no-such-file"), std::string::npos) << r.output;
  r = mount_view("--exclude /");
  EXPECT_EQ(r.status, 2) << r.output;
  MountedVault v(VaultOptions{});
  r = run_shell(v.mount_command() + " --exclude x");
  EXPECT_EQ(r.status, 2) << r.output;
}

}  // namespace
}  // namespace gcfs::test
