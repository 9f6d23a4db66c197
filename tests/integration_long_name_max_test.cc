// init --longnamemax N: no name in CIPHERDIR longer than N bytes, whatever the plaintext names;
// the limit is in the config (a feature that a gpucryptfs without it refuses), shown by info,
// and known to fsck; out-of-range values are usage errors.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

class LongNameMax : public ::testing::Test {
 protected:
  LongNameMax() : root_("gcfs-lnm") {
    cipher_ = root_.path() + "/cipher";
    plain_ = root_.path() + "/plain";
    pass_ = root_.path() + "/pass";
    ::mkdir(cipher_.c_str(), 0700);
    ::mkdir(plain_.c_str(), 0700);
    write_file(pass_, "pw\n");
    ::chmod(pass_.c_str(), 0600);
  }
  ~LongNameMax() override {
    for (const auto& m : {plain_, root_.path() + "/fwd"}) run_shell("fusermount3 -u " + q(m) + " 2>/dev/null");
  }
  static std::string q(const std::string& s) { return shell_quote(s); }
  CommandResult init(const std::string& extra) {
    return run_shell(test_binary() + " init -q --scrypt-logn 10 --passfile " + q(pass_) + " " + extra + " " + q(cipher_));
  }
  CommandResult mount() {
    return run_shell(test_binary() + " mount --engine " + test_engine() + transport_arg() + " --passfile " + q(pass_) +
                     " --log " + q(root_.path() + "/log") + " " + q(cipher_) + " " + q(plain_));
  }
  void unmount() { ASSERT_EQ(run_shell("fusermount3 -u " + q(plain_)).status, 0); }
  // The longest name anywhere in CIPHERDIR.
  std::size_t longest_backing_name() {
    auto r = run_shell("find . -mindepth 1 -printf '%f\\n' | awk '{ if (length($0) > m) m = length($0) } END { print m }'", cipher_);
    return static_cast<std::size_t>(std::stoul(r.output));
  }
  TempDir root_;
  std::string cipher_, plain_, pass_;
};

TEST_F(LongNameMax, NoBackingNameIsLongerThanTheLimit) {
  ASSERT_EQ(init("--longnamemax 62").status, 0);
  auto r = run_shell(test_binary() + " info " + q(cipher_));
  EXPECT_NE(r.output.find("long_name_max"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("at most 62 bytes"), std::string::npos) << r.output;
  ASSERT_EQ(mount().status, 0);
  // Names whose encrypted form is just under, at and over 62 bytes, and up to NAME_MAX.
  for (std::size_t n : {1u, 20u, 30u, 31u, 32u, 46u, 47u, 48u, 100u, 200u, 255u}) {
    const std::string name(n, static_cast<char>('a' + n % 26));
    write_file(plain_ + "/" + name, std::to_string(n));
    ASSERT_EQ(::mkdir((plain_ + "/d" + name.substr(1)).c_str(), 0700), 0) << n;
    write_file(plain_ + "/d" + name.substr(1) + "/" + name, "inner");
  }
  ASSERT_EQ(::symlink("target", (plain_ + "/" + std::string(120, 's')).c_str()), 0);
  ASSERT_EQ(::rename((plain_ + "/" + std::string(100, 'w')).c_str(), (plain_ + "/" + std::string(150, 'r')).c_str()), 0);
  unmount();
  EXPECT_LE(longest_backing_name(), 62u);
  ASSERT_EQ(mount().status, 0);
  EXPECT_EQ(read_file(plain_ + "/" + std::string(20, 'u')), "20");
  EXPECT_EQ(read_file(plain_ + "/" + std::string(150, 'r')), "100");
  EXPECT_EQ(read_file(plain_ + "/d" + std::string(254, 'v') + "/" + std::string(255, 'v')), "inner");
  r = run_shell("ls | wc -l", plain_);
  EXPECT_EQ(r.output, "23\n");
  unmount();
  r = run_shell(test_binary() + " fsck --passfile " + q(pass_) + " " + q(cipher_));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(LongNameMax, TheLimitIsPartOfTheConfigAndItsRangeIsChecked) {
  EXPECT_EQ(init("--longnamemax 61").status, 2);
  EXPECT_EQ(init("--longnamemax 256").status, 2);
  ASSERT_EQ(init("--longnamemax 255").status, 0);
  EXPECT_EQ(read_file(cipher_ + "/gpucryptfs.conf").find("long_name_max"), std::string::npos)
      << "255 is the default: nothing for older versions to refuse";
  run_shell("rm -rf " + q(cipher_) + " && mkdir " + q(cipher_));
  ASSERT_EQ(init("--longnamemax 100").status, 0);
  // The feature without its field (or an edited one) is a damaged config, refused before scrypt.
  auto j = nlohmann::json::parse(read_file(cipher_ + "/gpucryptfs.conf"));
  EXPECT_EQ(j["long_name_max"], 100);
  j.erase("long_name_max");
  ::chmod((cipher_ + "/gpucryptfs.conf").c_str(), 0600);
  write_file(cipher_ + "/gpucryptfs.conf", j.dump());
  auto r = mount();
  EXPECT_EQ(r.status, 23) << r.output;
  j["long_name_max"] = 70;  // within range but not what the slot was made with: the wrap refuses it
  write_file(cipher_ + "/gpucryptfs.conf", j.dump());
  r = mount();
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 23) << "a well-formed edit is told apart only by the wrap (exit 12): " << r.output;
}

TEST_F(LongNameMax, AReverseViewKeepsTheLimitAndItsCopyMounts) {
  // cipher_ plays PLAINDIR here; the view goes to plain_, its copy and mount beside them.
  for (std::size_t n : {10u, 47u, 100u, 255u}) write_file(cipher_ + "/" + std::string(n, 'p'), std::to_string(n));
  ASSERT_EQ(run_shell(test_binary() + " init --reverse -q --scrypt-logn 10 --longnamemax 64 --passfile " + q(pass_) + " " +
                      q(cipher_)).status, 0);
  auto r = run_shell(test_binary() + " mount --reverse --engine " + test_engine() + transport_arg() + " --passfile " +
                     q(pass_) + " --log " + q(root_.path() + "/log") + " " + q(cipher_) + " " + q(plain_));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string copy = root_.path() + "/copy", fwd = root_.path() + "/fwd";
  ASSERT_EQ(run_shell("cp -a " + q(plain_) + " " + q(copy) + " && mkdir " + q(fwd)).status, 0);
  unmount();
  r = run_shell("find . -mindepth 1 -printf '%f\\n' | awk '{ if (length($0) > m) m = length($0) } END { print m }'", copy);
  EXPECT_LE(std::stoul(r.output), 64u) << r.output;
  r = run_shell(test_binary() + " mount --read-only --engine " + test_engine() + transport_arg() + " --passfile " +
                q(pass_) + " --log " + q(root_.path() + "/log") + " " + q(copy) + " " + q(fwd));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_file(fwd + "/" + std::string(255, 'p')), "255");
  EXPECT_EQ(read_file(fwd + "/" + std::string(47, 'p')), "47");
  ASSERT_EQ(run_shell("fusermount3 -u " + q(fwd)).status, 0);
}

}  // namespace
}  // namespace gcfs::test
