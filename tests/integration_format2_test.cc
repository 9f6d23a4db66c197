// Format 2 (sector-aligned chunk data, docs/FORMAT.md) through the mount: vaults of both formats
// side by side, O_DIRECT and its fallback (--backing-io), and the stored vaults of every format
// version, which must keep mounting and reading as they did.
#include <cstdlib>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "support/mounted_vault.h"

#ifndef GCFS_SOURCE_DIR
#error "GCFS_SOURCE_DIR must name the source tree (for tests/data)"
#endif
#ifndef GCFS_REFUSE_O_DIRECT_LIB
#error "GCFS_REFUSE_O_DIRECT_LIB must name the preload library that refuses O_DIRECT"
#endif

namespace gcfs::test {
namespace {

VaultOptions with_format(int format, std::vector<std::string> extra = {}) {
  VaultOptions o;
  o.format = format;
  for (auto& a : extra) o.mount_args.push_back(a);
  return o;
}

// The same tree in any vault: an empty file, small files (inline in format 2), files ending on
// either side of the inline limit and of chunk and group boundaries, a sparse file, and a rewrite.
const char* kFillScript = R"(set -e
: > empty
printf 'hello' > small
head -c 3968 /dev/urandom > at_inline_limit
head -c 3969 /dev/urandom > past_inline_limit
head -c 530000 /dev/urandom > past_a_group
mkdir -p d/e && printf 'deep' > d/e/f
truncate -s 2000000 sparse && printf 'X' | dd of=sparse bs=1 seek=1000000 conv=notrunc status=none
printf 'ABC' | dd of=past_a_group bs=1 seek=524287 conv=notrunc status=none
ln -s small link
sha256sum empty small at_inline_limit past_inline_limit past_a_group d/e/f sparse link
)";

std::string fsck(const MountedVault& v) {
  auto r = run_shell(v.binary() + " fsck --passfile " + shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()));
  return std::to_string(r.status) + ": " + r.output;
}

TEST(Format2, BothFormatsSideBySideReadBackAndPassFsck) {
  MountedVault v1(with_format(1)), v2(with_format(2));
  auto a = v1.sh(kFillScript), b = v2.sh(kFillScript);
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  const std::string sums = "sha256sum empty small at_inline_limit past_inline_limit past_a_group d/e/f sparse link";
  // Same data into both: copy v1's files over v2's, so the checksums must agree.
  ASSERT_EQ(run_shell("cp -a " + shell_quote(v1.mountpoint()) + "/. " + shell_quote(v2.mountpoint()) + "/").status, 0);
  const std::string want = v1.sh(sums).output;
  v1.remount();
  v2.remount();
  EXPECT_EQ(v1.sh(sums).output, want);
  EXPECT_EQ(v2.sh(sums).output, want);
  v1.unmount();
  v2.unmount();
  EXPECT_EQ(fsck(v1).substr(0, 2), "0:") << fsck(v1);
  EXPECT_EQ(fsck(v2).substr(0, 2), "0:") << fsck(v2);
  // info names each vault's version.
  EXPECT_NE(run_shell(v1.binary() + " info " + shell_quote(v1.cipherdir())).output.find("gpucryptfs version 1,"),
            std::string::npos);
  EXPECT_NE(run_shell(v2.binary() + " info " + shell_quote(v2.cipherdir())).output.find("gpucryptfs version 2"),
            std::string::npos);
}

TEST(Format2, ChunkDataOnDiskIsAligned) {
  MountedVault v(with_format(2));
  ASSERT_EQ(v.sh("head -c 200000 /dev/zero > big && printf 'x' > tiny").status, 0);
  v.unmount();
  // The backing file of `big`: 4 KiB header block, then 49 data blocks of 4 KiB (the last holds
  // 3392 bytes); of `tiny`: 128 bytes of header block and one byte.
  auto sizes = run_shell("find " + shell_quote(v.cipherdir()) + " -type f ! -name 'gpucryptfs.*' -printf '%s\\n' | sort -n");
  EXPECT_EQ(sizes.output, "129\n" + std::to_string(4096 + 48 * 4096 + 3392) + "\n");
}

TEST(Format2, DirectAndBufferedBackingIoReadTheSameBytes) {
  MountedVault v(with_format(2, {"--backing-io", "direct"}));
  ASSERT_EQ(v.sh(kFillScript).status, 0);
  const std::string sums = v.sh("sha256sum small past_inline_limit past_a_group sparse").output;
  EXPECT_NE(v.log().find("backing I/O: O_DIRECT"), std::string::npos) << v.log();
  v.unmount();
  // The same vault mounted buffered.
  auto r = run_shell(v.binary() + " mount --backing-io buffered --passfile " + shell_quote(v.passfile()) + " --log " +
                     shell_quote(v.log_path()) + " " + shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(v.sh("sha256sum small past_inline_limit past_a_group sparse").output, sums);
  run_shell(MountedVault::unmount_command(false) + shell_quote(v.mountpoint()));
}

// A mount the test expected to be refused but that went through is not the vault's to unmount
// (it was made outside MountedVault): without this, a failing test would leave it and its daemon.
void unmount_if_mounted(const MountedVault& v) {
  if (v.in_mount_table()) run_shell(MountedVault::unmount_command(false) + shell_quote(v.mountpoint()));
}

TEST(Format2, DirectIsRefusedForFormatOneAndBadValuesAreRefused) {
  MountedVault v(with_format(1));
  v.unmount();
  auto r = run_shell(v.binary() + " mount --backing-io direct --passfile " + shell_quote(v.passfile()) + " " +
                     shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint()));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("needs a format 2 vault"), std::string::npos) << r.output;
  r = run_shell(v.binary() + " mount --backing-io sometimes --passfile " + shell_quote(v.passfile()) + " " +
                shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint()));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--backing-io must be"), std::string::npos) << r.output;
  EXPECT_FALSE(v.in_mount_table());
  unmount_if_mounted(v);
}

TEST(Format2, FallsBackToBufferedOnceWhereTheBackingRefusesODirect) {
  // The daemon runs with a preload library under which every O_DIRECT open fails with EINVAL, as
  // on a backing filesystem that refuses O_DIRECT.
  VaultOptions o = with_format(2);
  // A sanitized daemon (scripts/sanitize.sh) wants its runtime first among the loaded libraries;
  // the shim only wraps open calls, so that order does not matter here.
  const char* asan = std::getenv("ASAN_OPTIONS");
  o.shell_prefix = std::string("ASAN_OPTIONS=") + shell_quote(std::string(asan ? asan : "") + ":verify_asan_link_order=0") +
                   " LD_PRELOAD=" + shell_quote(GCFS_REFUSE_O_DIRECT_LIB) + " ";
  MountedVault v(o);
  auto r = v.sh(kFillScript);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string sums = v.sh("sha256sum small past_inline_limit past_a_group sparse").output;
  v.remount();
  EXPECT_EQ(v.sh("sha256sum small past_inline_limit past_a_group sparse").output, sums);
  const std::string log = v.log();
  // One line per mount, with the reason.
  std::size_t lines = 0;
  for (std::size_t at = log.find("buffered instead of O_DIRECT"); at != std::string::npos;
       at = log.find("buffered instead of O_DIRECT", at + 1))
    ++lines;
  EXPECT_EQ(lines, 2u) << log;
  EXPECT_NE(log.find("Invalid argument"), std::string::npos) << log;
  v.unmount();
  // --backing-io direct refuses to mount there instead.
  r = run_shell(o.shell_prefix + v.binary() + " mount --backing-io direct --passfile " + shell_quote(v.passfile()) +
                " --log " + shell_quote(v.log_path()) + " " + shell_quote(v.cipherdir()) + " " +
                shell_quote(v.mountpoint()));
  EXPECT_NE(r.status, 0);
  EXPECT_NE((r.output + v.log()).find("does not take O_DIRECT"), std::string::npos) << r.output << v.log();
  EXPECT_FALSE(v.in_mount_table());
  unmount_if_mounted(v);
}

// Whether files in dir can be opened with O_DIRECT (tmpfs only since Linux 6.6).
bool takes_o_direct(const std::string& dir) {
  const std::string probe = dir + "/gcfs-o-direct-probe." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

// mount --config FILE keeps the config outside CIPHERDIR: the O_DIRECT probe must not depend on
// it. On a backing folder that takes O_DIRECT, `direct` mounts and round-trips data, and `auto`
// chooses O_DIRECT (it must not fall back because CIPHERDIR holds no config).
class ConfigOutside : public ::testing::TestWithParam<const char*> {};

TEST_P(ConfigOutside, ODirectIsProbedOnTheVaultsOwnFile) {
  const std::string backing = "/dev/shm";
  if (::access(backing.c_str(), W_OK) != 0 || !takes_o_direct(backing))
    GTEST_SKIP() << backing << " does not take O_DIRECT here (tmpfs needs Linux 6.6 or later)";
  const std::string mode = GetParam();
  TempDir elsewhere("gcfs-config");
  const std::string config = elsewhere.path() + "/vault.conf";
  VaultOptions o = with_format(2, {"--config", shell_quote(config), "--backing-io", mode});
  o.parent_dir = backing;
  o.mount = false;
  MountedVault v(o);
  ASSERT_EQ(run_shell("mv " + shell_quote(v.cipherdir() + "/gpucryptfs.conf") + " " + shell_quote(config)).status, 0);
  v.mount();
  ASSERT_EQ(v.sh(kFillScript).status, 0);
  const std::string sums = v.sh("sha256sum small past_inline_limit past_a_group sparse").output;
  v.remount();
  EXPECT_EQ(v.sh("sha256sum small past_inline_limit past_a_group sparse").output, sums);
  const std::string log = v.log();
  EXPECT_NE(log.find("backing I/O: O_DIRECT (--backing-io " + mode + ")"), std::string::npos) << log;
  EXPECT_EQ(log.find("buffered instead of O_DIRECT"), std::string::npos) << log;
  // The config stayed outside: the probe found O_DIRECT without it.
  EXPECT_NE(::access((v.cipherdir() + "/gpucryptfs.conf").c_str(), F_OK), 0);
}

INSTANTIATE_TEST_SUITE_P(BackingIo, ConfigOutside, ::testing::Values("direct", "auto"));

// The probe's file, the root directory's IV, replaced by a FIFO or a symbolic link: the mount
// refuses at once with the damage named, in every --backing-io mode that probes; it never blocks
// on the FIFO and never follows the link.
TEST(Format2, DamagedRootIvIsReportedByTheODirectProbe) {
  MountedVault v(with_format(2));
  v.unmount();
  const std::string iv = v.cipherdir() + "/gpucryptfs.diriv";
  for (const char* kind : {"fifo", "symlink"}) {
    const std::string plant = std::string(kind) == "fifo" ? "mkfifo " + shell_quote(iv)
                                                          : "ln -s /etc/hostname " + shell_quote(iv);
    ASSERT_EQ(run_shell("rm -f " + shell_quote(iv) + " && " + plant).status, 0);
    for (const char* mode : {"direct", "auto"}) {
      auto r = run_shell("timeout 20 " + v.binary() + " mount --backing-io " + mode + " --passfile " +
                         shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint()));
      EXPECT_NE(r.status, 0) << kind << " " << mode << ": " << r.output;
      EXPECT_NE(r.status, 124) << kind << " " << mode << ": blocked";
      EXPECT_NE(r.output.find("gpucryptfs.diriv is damaged (is"), std::string::npos)
          << kind << " " << mode << ": " << r.output;
      EXPECT_NE(r.output.find(std::string(kind) == "fifo" ? "FIFO" : "symbolic link"), std::string::npos)
          << kind << " " << mode << ": " << r.output;
      EXPECT_FALSE(v.in_mount_table());
    }
  }
}

// tests/data/vault-vN: a small vault of each format version, made by the gpucryptfs of its time
// (password "stored vault"), with known contents. Each must keep mounting, reading, writing and
// passing fsck; a change that breaks one is a silent format change.
class StoredVault : public ::testing::TestWithParam<int> {};

TEST_P(StoredVault, MountsReadsWritesAndPassesFsck) {
  const std::string src = std::string(GCFS_SOURCE_DIR) + "/tests/data/vault-v" + std::to_string(GetParam());
  TempDir t("gcfs-stored");
  const std::string cipher = t.path() + "/cipher", plain = t.path() + "/plain", pw = t.path() + "/pw";
  ASSERT_EQ(run_shell("cp -a " + shell_quote(src) + " " + shell_quote(cipher) + " && mkdir " + shell_quote(plain) +
                      " && printf 'stored vault\\n' > " + shell_quote(pw))
                .status,
            0);
  const std::string bin = test_binary();
  auto r = run_shell(bin + " info " + shell_quote(cipher));
  EXPECT_NE(r.output.find("gpucryptfs version " + std::to_string(GetParam())), std::string::npos) << r.output;
  r = run_shell(bin + " fsck --passfile " + shell_quote(pw) + " " + shell_quote(cipher));
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_shell(bin + " mount --passfile " + shell_quote(pw) + " --log " + shell_quote(t.path() + "/log") + " " +
                shell_quote(cipher) + " " + shell_quote(plain));
  ASSERT_EQ(r.status, 0) << r.output;
  auto sums = run_shell("cd " + shell_quote(plain) + " && sha256sum -c MANIFEST.sha256 && readlink link && ls -a | tr '\\n' ' '");
  EXPECT_EQ(sums.status, 0) << sums.output;
  EXPECT_NE(sums.output.find("small\n"), std::string::npos) << sums.output;
  // Writing: a rewrite inside, an append, a new file.
  auto w = run_shell("cd " + shell_quote(plain) +
                     " && printf 'Z' | dd of=medium bs=1 seek=5000 conv=notrunc status=none && printf 'tail' >> small && "
                     "printf 'new' > added && cat small added | head -c 100");
  EXPECT_EQ(w.status, 0) << w.output;
  run_shell(MountedVault::unmount_command(false) + shell_quote(plain));
  r = run_shell(bin + " fsck --passfile " + shell_quote(pw) + " " + shell_quote(cipher));
  EXPECT_EQ(r.status, 0) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Versions, StoredVault, ::testing::Values(1, 2),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

}  // namespace
}  // namespace gcfs::test
