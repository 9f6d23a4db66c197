// gpucryptfs rekey end to end (docs/USAGE.md, "Re-keying"): a tree of every kind of entry reads
// back identically under the new master key and passes fsck; the old master key (exit 14) and an
// old copy of the config with the old password open nothing; a re-key stopped dead at seeded
// points, or killed with SIGKILL, finishes when run again with nothing lost; a damaged record is
// refused and changes nothing; mount and fsck are refused mid-re-key, a re-key while mounted;
// the stored vaults of formats 1 and 2 (config version 1) re-key.
#include <sys/stat.h>

#include <sys/xattr.h>

#include <cerrno>
#include <cstring>

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <sstream>
#include <regex>
#include <string>

#include "support/mounted_vault.h"

#ifndef GCFS_SOURCE_DIR
#error "GCFS_SOURCE_DIR must name the source tree (for tests/data)"
#endif

namespace gcfs::test {
namespace {

std::string q(const std::string& s) { return shell_quote(s); }

// The lines in one snapshot and not the other: what a failure prints instead of two trees.
std::string line_diff(const std::string& a, const std::string& b) {
  auto lines = [](const std::string& s) {
    std::multiset<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.insert(l);
    return out;
  };
  const auto la = lines(a), lb = lines(b);
  std::string d;
  for (const auto& l : la)
    if (!lb.count(l)) d += "- " + l.substr(0, 120) + "\n";
  for (const auto& l : lb)
    if (!la.count(l)) d += "+ " + l.substr(0, 120) + "\n";
  return d;
}
#define EXPECT_SAME_TREE(a, b) EXPECT_EQ(line_diff(a, b), "")

// Every plaintext entry: path, type, size, mode, owner, link count, mtime; file contents' hash,
// symlink targets, extended attributes.
const char* kSnapshot =
    "find . -mindepth 1 | LC_ALL=C sort | while IFS= read -r f; do stat -c '%n %F %s %a %u %g %h %Y' \"$f\"; "
    "if [ -L \"$f\" ]; then readlink \"$f\"; elif [ -f \"$f\" ]; then sha256sum < \"$f\"; fi; "
    "getfattr -h -d --absolute-names \"$f\" 2>/dev/null | grep -v '^#'; done";

class RekeyCli : public ::testing::Test {
 protected:
  RekeyCli() : root_("gcfs-rekey") {
    cipher_ = root_.path() + "/cipher";
    plain_ = root_.path() + "/plain";
    ::mkdir(plain_.c_str(), 0700);
    write_file(file("pw"), "rekey password\n");
    write_file(file("pw1"), "second slot\n");
    ::chmod(file("pw").c_str(), 0600);
    ::chmod(file("pw1").c_str(), 0600);
  }
  ~RekeyCli() override { unmount(); }
  std::string file(const std::string& n) const { return root_.path() + "/" + n; }
  CommandResult gc(const std::string& args) const { return run_shell(test_binary() + " " + args + " </dev/null"); }
  CommandResult mount(const std::string& unlock = "") {
    const CommandResult r = gc("mount --engine cpu" + transport_arg() + " --log " + q(file("log")) + " " +
                               (unlock.empty() ? "--passfile " + q(file("pw")) : unlock) + " " + q(cipher_) + " " +
                               q(plain_));
    mounted_ = r.status == 0;
    return r;
  }
  void unmount() {
    if (!mounted_) return;
    run_shell(MountedVault::unmount_command(false) + q(plain_) + " || " + MountedVault::unmount_command(true) + q(plain_));
    mounted_ = false;
  }
  // dir_times: with directories' modification times (a re-key killed midway leaves those of the
  // directories it was changing at the time of the kill: docs/USAGE.md, "Re-keying").
  std::string snapshot(bool dir_times = true) {
    EXPECT_EQ(mount().status, 0);
    const CommandResult s =
        run_shell(std::string(kSnapshot) + (dir_times ? "" : " | sed -E 's/^(.* directory .*) [0-9]+$/\\1/'"), plain_);
    unmount();
    return s.output;
  }
  CommandResult rekey(const std::string& extra = "", const std::string& env = "") {
    return run_shell(env + " " + test_binary() + " rekey --engine " + test_engine() + " --passfile " + q(file("pw")) + " " + extra + " " +
                     q(cipher_) + " </dev/null");
  }
  void expect_fsck_clean() {
    const CommandResult f = gc("fsck --passfile " + q(file("pw")) + " " + q(cipher_));
    EXPECT_EQ(f.status, 0) << f.output;
  }
  // The master key init or rekey printed: eight groups of hex.
  static std::string printed_key(const std::string& out) {
    std::smatch m;
    static const std::regex key("([0-9a-f]{8}(-[0-9a-f]{8}){7})");
    return std::regex_search(out, m, key) ? m[1].str() : "";
  }
  // A vault holding the tree; big_mib: the large file's size. Returns init's master key.
  std::string make_tree(int big_mib) {
    ::mkdir(cipher_.c_str(), 0700);
    const CommandResult i = gc("init --scrypt-logn 10 --passfile " + q(file("pw")) + " " + q(cipher_));
    EXPECT_EQ(i.status, 0) << i.output;
    EXPECT_EQ(mount().status, 0);
    const std::string name200(200, 'n');
    const CommandResult w = run_shell(
        "set -e; : > empty; printf 'small file\\n' > small; head -c " + std::to_string(big_mib) +
            "M /dev/urandom > big; mkdir -p d/e/f/g/h/i/j/k/l/m/n/o; printf deep > d/e/f/g/h/i/j/k/l/m/n/o/leaf; "
            "ln big d/big-link; ln small d/e/small-link; ln -s d/e/f/g target-link; ln -s " + std::string(300, 'x') +
            " long-target; "
            "printf long > " + name200 + "; mkdir " + name200 + ".d; printf x > " + name200 + ".d/in; mkfifo fifo; "
            "for i in $(seq 1 40); do printf \"file $i\" > d/e/many-$i; done; "
            "dd if=/dev/urandom of=sparse bs=4096 count=1 seek=300 status=none; touch -d 2001-02-03 small d/e",
        plain_);
    EXPECT_EQ(w.status, 0) << w.output;
    // Through the system call, not setfattr: the GPU machine has no attr package.
    EXPECT_EQ(::setxattr((plain_ + "/small").c_str(), "user.colour", "blue", 4, 0), 0) << std::strerror(errno);
    EXPECT_EQ(::setxattr((plain_ + "/d/e").c_str(), "user.dir", "yes", 3, 0), 0) << std::strerror(errno);
    unmount();
    return printed_key(i.output);
  }

  // `rounds` times: CIPHERDIR put back from file("template"), the re-key (with `extra`) stopped
  // dead after a seeded number of durable changes (1 to max_step) up to three times, then run to
  // the end; the tree must read back as `before`, fsck clean.
  void stop_at_seeded_points(unsigned seed, int rounds, int max_step, const std::string& extra, const std::string& before) {
    std::mt19937 rng(seed);
    for (int round = 0; round < rounds; ++round) {
      run_shell("rm -rf " + q(cipher_) + " && cp -a " + q(file("template")) + " " + q(cipher_));
      std::uniform_int_distribution<int> point(1, max_step);
      for (int kill = 0; kill < 3; ++kill) {
        const int n = point(rng);
        const CommandResult r = rekey(extra, "GPUCRYPTFS_REKEY_TEST_STOP_AFTER=" + std::to_string(n));
        if (r.status == 0) break;  // it finished before step n
        ASSERT_EQ(r.status, 128 + 9) << "step " << n << ": " << r.output;
      }
      const CommandResult r = rekey(extra);
      ASSERT_EQ(r.status, 0) << r.output;
      EXPECT_SAME_TREE(snapshot(false), before) << "round " << round;
      expect_fsck_clean();
    }
  }

  TempDir root_;
  std::string cipher_, plain_;
  bool mounted_ = false;
};

TEST_F(RekeyCli, TheTreeReadsBackIdenticallyAndOnlyTheNewKeyOpensIt) {
  const std::string old_key = make_tree(40);
  ASSERT_FALSE(old_key.empty());
  ASSERT_EQ(gc("keyslot add --passfile " + q(file("pw")) + " --new-passfile " + q(file("pw1")) + " " + q(cipher_)).status, 0);
  const std::string before = snapshot();
  ASSERT_NE(before.find("leaf"), std::string::npos);
  run_shell("cp " + q(cipher_ + "/gpucryptfs.conf") + " " + q(file("old.conf")));
  // Slot 1 has no secret given and there is no terminal: refused before anything changes.
  CommandResult r = rekey();
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("key slot 1 has no secret"), std::string::npos) << r.output;
  EXPECT_EQ(run_shell("cmp " + q(cipher_ + "/gpucryptfs.conf") + " " + q(file("old.conf"))).status, 0);
  r = rekey("--slot-passfile 1=" + q(file("pw1")));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string new_key = printed_key(r.output);
  ASSERT_FALSE(new_key.empty()) << r.output;
  EXPECT_NE(new_key, old_key);
  EXPECT_SAME_TREE(snapshot(), before);
  expect_fsck_clean();
  // Both slots open the new config.
  EXPECT_EQ(mount("--passfile " + q(file("pw1"))).status, 0);
  unmount();
  // Hard links are still one inode.
  ASSERT_EQ(mount().status, 0);
  EXPECT_EQ(run_shell("[ $(stat -c %i big) = $(stat -c %i d/big-link) ]", plain_).status, 0);
  unmount();
  // The old master key opens nothing: 14.
  write_file(file("old.key"), old_key + "\n");
  r = gc("mount --masterkey --masterkey-file " + q(file("old.key")) + " --engine cpu" + transport_arg() + " " +
         q(cipher_) + " " + q(plain_));
  mounted_ = r.status == 0;
  EXPECT_EQ(r.status, 14) << r.output;
  // The old config with the old password: it unlocks, opens nothing, and says so.
  run_shell("cp " + q(cipher_ + "/gpucryptfs.conf") + " " + q(file("new.conf")) + " && cp -f " + q(file("old.conf")) +
            " " + q(cipher_ + "/gpucryptfs.conf"));
  r = mount();
  EXPECT_EQ(r.status, 14) << r.output;
  EXPECT_NE(r.output.find("before a 'gpucryptfs rekey'"), std::string::npos) << r.output;
  unmount();
  run_shell("cp -f " + q(file("new.conf")) + " " + q(cipher_ + "/gpucryptfs.conf"));
  // The new master key opens it.
  write_file(file("new.key"), new_key + "\n");
  r = gc("mount --masterkey --masterkey-file " + q(file("new.key")) + " --engine cpu" + transport_arg() + " --log " +
         q(file("log")) + " " + q(cipher_) + " " + q(plain_));
  mounted_ = r.status == 0;
  EXPECT_EQ(r.status, 0) << r.output;
  unmount();
}

TEST_F(RekeyCli, RefusedWhileMountedAndMountAndFsckRefusedMidRekey) {
  make_tree(1);
  ASSERT_EQ(mount().status, 0);
  CommandResult r = rekey();
  EXPECT_EQ(r.status, 31) << r.output;
  unmount();
  r = rekey("", "GPUCRYPTFS_REKEY_TEST_STOP_AFTER=5");
  EXPECT_EQ(r.status, 128 + 9) << r.output;
  r = mount();
  EXPECT_EQ(r.status, 31) << r.output;
  EXPECT_NE(r.output.find("run `gpucryptfs rekey` again"), std::string::npos) << r.output;
  r = gc("fsck --passfile " + q(file("pw")) + " " + q(cipher_));
  EXPECT_EQ(r.status, 31) << r.output;
  r = gc("passwd --passfile " + q(file("pw")) + " --new-passfile " + q(file("pw1")) + " " + q(cipher_));
  EXPECT_EQ(r.status, 31) << r.output;
  ASSERT_EQ(rekey().status, 0);
  expect_fsck_clean();
}

// Stopped dead after N durable changes (seeded), several times over, then run to the end.
TEST_F(RekeyCli, StoppedDeadAtSeededPointsAndRunAgainLosesNothing) {
  make_tree(2);
  const std::string before = snapshot(false);
  run_shell("cp -a " + q(cipher_) + " " + q(file("template")));
  stop_at_seeded_points(20261202, 6, 150, "", before);
}

// Several directories re-keyed at once (--jobs), hard links across them, stopped dead at seeded
// points (the step counter is shared by every walking thread), then run to the end.
TEST_F(RekeyCli, DirectoriesReKeyedAtOnceStopAnywhereAndLoseNothing) {
  make_tree(1);
  ASSERT_EQ(mount().status, 0);
  const CommandResult w = run_shell(
      "set -e; for d in $(seq 1 12); do mkdir -p p$d/q; for i in $(seq 1 15); do printf \"$d $i\" > p$d/f$i; done; "
      "printf deep$d > p$d/q/leaf; ln -s f1 p$d/link; done; ln p1/f1 p7/q/linked; ln p3/f2 p12/linked2",
      plain_);
  ASSERT_EQ(w.status, 0) << w.output;
  unmount();
  const std::string before = snapshot(false);
  run_shell("cp -a " + q(cipher_) + " " + q(file("template")));
  stop_at_seeded_points(20261203, 4, 400, "--jobs 6", before);
  if (HasFatalFailure()) return;
  ASSERT_EQ(mount().status, 0);
  EXPECT_EQ(run_shell("[ $(stat -c %i p1/f1) = $(stat -c %i p7/q/linked) ] && [ $(stat -c %h p3/f2) = 2 ]", plain_).status, 0);
  unmount();
  EXPECT_NE(rekey("--jobs 999").status, 0);
}

TEST_F(RekeyCli, KilledWithSigkillAndRunAgainLosesNothing) {
  make_tree(40);
  const std::string before = snapshot(false);
  for (int delay_ms : {30, 120}) {
    run_shell("(" + test_binary() + " rekey --engine " + test_engine() + " --passfile " + q(file("pw")) + " " + q(cipher_) +
              " </dev/null >/dev/null 2>&1 & p=$!; sleep " + std::to_string(delay_ms / 1000.0) + "; kill -9 $p; wait $p)");
  }
  const CommandResult r = rekey();
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_SAME_TREE(snapshot(false), before);
  expect_fsck_clean();
}

TEST_F(RekeyCli, ADamagedRecordIsRefusedAndChangesNothingAndOneGoodCopyResumes) {
  make_tree(1);
  const std::string before = snapshot(false);
  ASSERT_EQ(rekey("", "GPUCRYPTFS_REKEY_TEST_STOP_AFTER=12").status, 128 + 9);
  const std::string rec = cipher_ + "/gpucryptfs.rekey", copy = cipher_ + "/gpucryptfs.rekey.copy";
  run_shell("cp " + q(rec) + " " + q(file("rec")) + " && cp " + q(copy) + " " + q(file("copy")));
  // Both copies truncated: refused with the reason, CIPHERDIR left exactly as it was.
  run_shell("truncate -s 40 " + q(rec) + " && truncate -s 0 " + q(copy));
  const std::string listing = run_shell("cd " + q(cipher_) + " && ls -laR --time-style=full-iso").output;
  CommandResult r = rekey();
  EXPECT_EQ(r.status, 23) << r.output;
  EXPECT_NE(r.output.find("re-key record is damaged"), std::string::npos) << r.output;
  EXPECT_EQ(run_shell("cd " + q(cipher_) + " && ls -laR --time-style=full-iso").output, listing);
  // One copy back (the other still torn): the re-key resumes from it and finishes.
  run_shell("cp -f " + q(file("copy")) + " " + q(copy));
  r = rekey();
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_SAME_TREE(snapshot(false), before);
  expect_fsck_clean();
}

class StoredVaultRekey : public ::testing::TestWithParam<int> {};

TEST_P(StoredVaultRekey, ReKeysAndReadsBack) {
  const std::string src = std::string(GCFS_SOURCE_DIR) + "/tests/data/vault-v" + std::to_string(GetParam());
  TempDir t("gcfs-stored-rekey");
  const std::string cipher = t.path() + "/cipher", plain = t.path() + "/plain", pw = t.path() + "/pw";
  ASSERT_EQ(run_shell("cp -a " + q(src) + " " + q(cipher) + " && mkdir " + q(plain) + " && printf 'stored vault\\n' > " +
                      q(pw) + " && chmod 600 " + q(pw))
                .status,
            0);
  const std::string bin = test_binary();
  CommandResult r = run_shell(bin + " rekey --engine cpu --passfile " + q(pw) + " " + q(cipher) + " </dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(read_file(cipher + "/gpucryptfs.conf").find("\"config_version\": 2"), std::string::npos);
  r = run_shell(bin + " fsck --passfile " + q(pw) + " " + q(cipher));
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_shell(bin + " mount --engine cpu" + transport_arg() + " --passfile " + q(pw) + " --log " + q(t.path() + "/log") +
                " " + q(cipher) + " " + q(plain));
  ASSERT_EQ(r.status, 0) << r.output;
  const CommandResult sums = run_shell("cd " + q(plain) + " && sha256sum -c MANIFEST.sha256 && readlink link");
  EXPECT_EQ(sums.status, 0) << sums.output;
  run_shell(MountedVault::unmount_command(false) + q(plain));
}

INSTANTIATE_TEST_SUITE_P(Versions, StoredVaultRekey, ::testing::Values(1, 2),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

}  // namespace
}  // namespace gcfs::test
