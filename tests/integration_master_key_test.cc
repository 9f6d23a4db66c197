// The master key as the last way back in (issue 13, item 4): `init` prints it once in hex groups
// (not with --quiet); `mount --masterkey` reads it from standard input or --masterkey-file and
// mounts a vault whose config was deleted, finding the chunk size from the files; a wrong or
// malformed key is refused (exit status 14) and mounts nothing; `passwd --masterkey` writes a new
// config; neither `info`, the config nor the log ever holds the key.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <thread>
#include <string>
#include <tuple>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::string q(const std::string& s) { return shell_quote(s); }

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

class MasterKey : public ::testing::Test {
 protected:
  MasterKey() : root_("gcfs-masterkey") {
    cipher_ = root_.path() + "/cipher";
    plain_ = root_.path() + "/plain";
    pw_ = root_.path() + "/pw";
    log_ = root_.path() + "/log";
    ::mkdir(cipher_.c_str(), 0700);
    ::mkdir(plain_.c_str(), 0700);
    write_file(pw_, "the password\n");
    ::chmod(pw_.c_str(), 0600);  // one others can read is warned about, and --quiet prints nothing else
  }
  ~MasterKey() override { unmount(); }

  // init; returns its output and puts the printed key in key_.
  std::string init(const std::string& extra = "") {
    const CommandResult r = run_shell(test_binary() + " init --scrypt-logn 10 --passfile " + q(pw_) + " " + extra + " " + q(cipher_));
    EXPECT_EQ(r.status, 0) << r.output;
    std::smatch m;
    if (std::regex_search(r.output, m, std::regex("\n    ([0-9a-f]{8}(-[0-9a-f]{8}){7})\n"))) key_ = m[1];
    return r.output;
  }
  CommandResult mount(const std::string& how) {
    const CommandResult r = run_shell(how + " " + test_binary() + " mount --masterkey --engine cpu --log " + q(log_) + " " + q(cipher_) + " " + q(plain_));
    if (r.status == 0) mounted_ = true;
    return r;
  }
  CommandResult mount_with_key(const std::string& key) {
    return mount("printf '%s\\n' " + q(key) + " |");
  }
  void unmount() {
    if (!mounted_) return;
    run_shell(MountedVault::unmount_command(false) + q(plain_) + " || " + MountedVault::unmount_command(true) + q(plain_));
    mounted_ = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  bool is_mounted() const { return read_file("/proc/self/mounts").find(" " + plain_ + " ") != std::string::npos; }
  // Files of more than one chunk and a few small ones, in the root and below.
  void populate_and_unmount(std::size_t big) {
    ASSERT_EQ(run_shell(test_binary() + " mount --engine cpu --passfile " + q(pw_) + " --log " + q(log_) + " " + q(cipher_) + " " + q(plain_)).status, 0);
    mounted_ = true;
    write_file(plain_ + "/big", pattern(big, 1));
    write_file(plain_ + "/small", "small\n");
    ASSERT_EQ(::mkdir((plain_ + "/d").c_str(), 0700), 0);
    write_file(plain_ + "/d/" + std::string(200, 'n'), pattern(big / 3, 2));
    unmount();
  }
  void expect_contents(std::size_t big) {
    EXPECT_EQ(read_file(plain_ + "/big"), pattern(big, 1));
    EXPECT_EQ(read_file(plain_ + "/small"), "small\n");
    EXPECT_EQ(read_file(plain_ + "/d/" + std::string(200, 'n')), pattern(big / 3, 2));
  }

  TempDir root_;
  std::string cipher_, plain_, pw_, log_, key_;
  bool mounted_ = false;
};

TEST_F(MasterKey, InitPrintsItOnceAndNothingElseShowsIt) {
  const std::string out = init();
  ASSERT_EQ(key_.size(), 71u) << out;
  EXPECT_NE(out.find("paper"), std::string::npos) << out;
  std::string hex = key_;
  hex.erase(std::remove(hex.begin(), hex.end(), '-'), hex.end());
  const CommandResult info = run_shell(test_binary() + " info " + q(cipher_));
  EXPECT_EQ(info.status, 0);
  EXPECT_EQ(info.output.find(hex.substr(0, 8)), std::string::npos) << info.output;
  const std::string config = read_file(cipher_ + "/gpucryptfs.conf");
  EXPECT_EQ(config.find(hex.substr(0, 8)), std::string::npos);
  populate_and_unmount(10000);
  EXPECT_EQ(read_file(log_).find(hex.substr(0, 8)), std::string::npos);
  // --quiet: a vault made without printing anything.
  TempDir other("gcfs-masterkey");
  const CommandResult quiet = run_shell(test_binary() + " init --quiet --scrypt-logn 10 --passfile " + q(pw_) + " " + q(other.path()));
  EXPECT_EQ(quiet.status, 0);
  EXPECT_EQ(quiet.output, "");
}

TEST_F(MasterKey, MountsAVaultWhoseConfigWasDeleted) {
  init();
  populate_and_unmount(20000);
  ASSERT_EQ(::unlink((cipher_ + "/gpucryptfs.conf").c_str()), 0);
  // With the password nothing mounts: without its config CIPHERDIR is no vault (exit status 23).
  EXPECT_EQ(run_shell(test_binary() + " mount --passfile " + q(pw_) + " " + q(cipher_) + " " + q(plain_)).status, 23);
  const CommandResult r = mount_with_key(key_);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contents(20000);
  EXPECT_NE(r.output.find("chunk size, 4096 bytes, was read from the files"), std::string::npos) << r.output;
  EXPECT_NE(read_file(log_).find("passwd --masterkey"), std::string::npos);
  // Writes go on in the same format: the chunk size found is the vault's.
  write_file(plain_ + "/new", pattern(9000, 3));
  unmount();
  // passwd --masterkey writes a new config; the vault then opens with the new password.
  const std::string key_file = root_.path() + "/key", new_pw = root_.path() + "/new-pw";
  write_file(key_file, key_ + "\n");
  write_file(new_pw, "a new password\n");
  const CommandResult p = run_shell(test_binary() + " passwd --masterkey-file " + q(key_file) + " --new-passfile " + q(new_pw) +
                                    " --scrypt-logn 10 " + q(cipher_));
  ASSERT_EQ(p.status, 0) << p.output;
  ASSERT_EQ(run_shell(test_binary() + " mount --engine cpu --passfile " + q(new_pw) + " --log " + q(log_) + " " + q(cipher_) + " " + q(plain_)).status, 0);
  mounted_ = true;
  expect_contents(20000);
  EXPECT_EQ(read_file(plain_ + "/new"), pattern(9000, 3));
  const CommandResult fsck_ok = run_shell(test_binary() + " fsck --force --passfile " + q(new_pw) + " " + q(cipher_));
  EXPECT_EQ(fsck_ok.status, 0) << fsck_ok.output;
}

TEST_F(MasterKey, FindsAChunkSizeOtherThanTheDefault) {
  init("--chunk-size 64K");
  populate_and_unmount(200000);
  ASSERT_EQ(::unlink((cipher_ + "/gpucryptfs.conf").c_str()), 0);
  const CommandResult r = mount_with_key(key_);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("chunk size, 65536 bytes, was read from the files"), std::string::npos) << r.output;
  expect_contents(200000);
  unmount();
  // A chunk size the files contradict is refused, not used.
  EXPECT_EQ(run_shell("printf '%s\\n' " + q(key_) + " | " + test_binary() + " mount --masterkey --chunk-size 4K --engine cpu " +
                      q(cipher_) + " " + q(plain_)).status, 14);
  EXPECT_FALSE(is_mounted());
}

// An edited config is what makes the password "fail", which is exactly when a user reaches for
// the master key; the key cannot authenticate the config's clear fields, so each one the mount
// would use is checked against the vault's files. A chunk size or format they contradict is
// refused naming the field, by mount and by passwd, which must not write it into a fresh config
// (a mount with 4 KiB chunks on a 64 KiB vault destroyed what it wrote over).
TEST_F(MasterKey, AConfigFieldTheFilesContradictIsRefusedNeverMountedOrBlessed) {
  init("--chunk-size 64K");
  populate_and_unmount(200000);
  const std::string conf = cipher_ + "/gpucryptfs.conf", original = read_file(conf);
  const std::string key_file = root_.path() + "/key", new_pw = root_.path() + "/new-pw";
  write_file(key_file, key_ + "\n");
  write_file(new_pw, "a new password\n");
  const auto edit = [&](const std::string& from, const std::string& to) {
    std::string c = original;
    const auto at = c.find(from);
    ASSERT_NE(at, std::string::npos) << c;
    c.replace(at, from.size(), to);
    ::chmod(conf.c_str(), 0600);
    write_file(conf, c);
  };
  for (const auto& [from, to, field] : {std::tuple{std::string("\"chunk_size\": 65536"), std::string("\"chunk_size\": 4096"),
                                                   std::string("\"chunk_size\": 4096")},
                                        std::tuple{std::string("\"version\": 2"), std::string("\"version\": 1"),
                                                   std::string("\"version\": 1")}}) {
    if (from.find("version") != std::string::npos && original.find(from) == std::string::npos) continue;  // a format 1 run
    edit(from, to);
    const std::string edited = read_file(conf);
    EXPECT_EQ(run_shell(test_binary() + " mount --engine cpu --passfile " + q(pw_) + " " + q(cipher_) + " " + q(plain_)).status, 12);
    CommandResult r = mount_with_key(key_);
    EXPECT_EQ(r.status, 23) << r.output;
    EXPECT_NE(r.output.find(field), std::string::npos) << r.output;
    EXPECT_FALSE(is_mounted());
    if (is_mounted()) unmount();
    r = run_shell(test_binary() + " passwd --masterkey-file " + q(key_file) + " --new-passfile " + q(new_pw) +
                  " --scrypt-logn 10 " + q(cipher_));
    EXPECT_EQ(r.status, 23) << r.output;
    EXPECT_NE(r.output.find(field), std::string::npos) << r.output;
    EXPECT_EQ(read_file(conf), edited) << "passwd wrote a config";
  }
  // Put back as it was, the vault is whole.
  ::chmod(conf.c_str(), 0600);
  write_file(conf, original);
  ASSERT_EQ(run_shell(test_binary() + " mount --engine cpu --passfile " + q(pw_) + " --log " + q(log_) + " " + q(cipher_) + " " + q(plain_)).status, 0);
  mounted_ = true;
  expect_contents(200000);
}

// A vault of 64 KiB chunks holding only files shorter than 4 KiB: nothing pins the size, 4 KiB is
// assumed (and said), and since every file it holds is one chunk under either size, the vault
// stays whole: what the master-key mount writes reads back under the config passwd writes.
TEST_F(MasterKey, ASizeNoFilePinsIsAssumedWithoutLosingAByte) {
  init("--chunk-size 64K");
  ASSERT_EQ(run_shell(test_binary() + " mount --engine cpu --passfile " + q(pw_) + " --log " + q(log_) + " " + q(cipher_) + " " + q(plain_)).status, 0);
  mounted_ = true;
  write_file(plain_ + "/a", pattern(3000, 4));
  write_file(plain_ + "/b", "bee\n");
  unmount();
  ASSERT_EQ(::unlink((cipher_ + "/gpucryptfs.conf").c_str()), 0);
  const CommandResult r = mount_with_key(key_);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("could not be read from the files"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("assuming 4096 bytes"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(plain_ + "/a"), pattern(3000, 4));
  write_file(plain_ + "/grown", pattern(100000, 5));
  unmount();
  const std::string key_file = root_.path() + "/key";
  write_file(key_file, key_ + "\n");
  ASSERT_EQ(run_shell(test_binary() + " passwd --masterkey-file " + q(key_file) + " --new-passfile " + q(pw_) +
                      " --scrypt-logn 10 " + q(cipher_)).status, 0);
  const CommandResult info = run_shell(test_binary() + " info " + q(cipher_));
  EXPECT_NE(info.output.find("chunk size 4096 bytes"), std::string::npos) << info.output;
  ASSERT_EQ(run_shell(test_binary() + " mount --engine cpu --passfile " + q(pw_) + " --log " + q(log_) + " " + q(cipher_) + " " + q(plain_)).status, 0);
  mounted_ = true;
  EXPECT_EQ(read_file(plain_ + "/a"), pattern(3000, 4));
  EXPECT_EQ(read_file(plain_ + "/b"), "bee\n");
  EXPECT_EQ(read_file(plain_ + "/grown"), pattern(100000, 5));
}

TEST_F(MasterKey, AForgottenPasswordWithTheConfigStillThere) {
  init();
  populate_and_unmount(5000);
  ASSERT_EQ(mount_with_key(key_).status, 0);
  expect_contents(5000);
}

TEST_F(MasterKey, WrongOrMalformedKeysMountNothing) {
  init();
  populate_and_unmount(5000);
  std::string wrong = key_;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  CommandResult r = mount_with_key(wrong);
  EXPECT_EQ(r.status, 14) << r.output;
  EXPECT_NE(r.output.find("does not open this vault"), std::string::npos) << r.output;
  r = mount_with_key(key_.substr(1));
  EXPECT_EQ(r.status, 14) << r.output;
  EXPECT_EQ(r.output.find(key_.substr(1)), std::string::npos) << "the key is never echoed";
  r = mount_with_key("");
  EXPECT_EQ(r.status, 14) << r.output;
  EXPECT_FALSE(is_mounted());
  // Never on the command line.
  r = run_shell(test_binary() + " mount --masterkey " + q(key_) + " " + q(cipher_) + " " + q(plain_) + " </dev/null");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_FALSE(is_mounted());
}

}  // namespace
}  // namespace gcfs::test
