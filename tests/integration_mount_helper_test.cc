// Mounting as a gocryptfs user expects to (issue 13, items 2 and 5): /etc/fstab lines of type
// fuse.gpucryptfs through mount(8) and mount.fuse3 (`mount -T FSTAB MOUNTPOINT`, `mount -a -T
// FSTAB`), unknown options refused by name; --idle unmounting an unused mount and keeping a used
// one; --config keeping the config outside CIPHERDIR; --nonempty.
//
// mount(8) clears PATH for its helpers and mount.fuse3 runs `gpucryptfs` through /bin/sh's default
// PATH, so the fstab tests run in a private mount namespace (unshare -m) where a tmpfs over
// /usr/local/sbin holds a link to the binary under test: nothing is installed outside the build.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::string q(const std::string& s) { return shell_quote(s); }

VaultOptions not_mounted(std::vector<std::string> mount_args = test_mount_args()) {
  VaultOptions o;
  o.mount = false;
  o.mount_args = std::move(mount_args);
  return o;
}

bool listed(const std::string& mountpoint) {
  return read_file("/proc/self/mounts").find(" " + mountpoint + " fuse.gpucryptfs ") != std::string::npos;
}

class Fstab : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mount(8) with an fstab needs root";
    GCFS_REQUIRE_PROGRAM("unshare");
    GCFS_REQUIRE_PROGRAM("mount.fuse3");
    if (run_shell("unshare -m true").status != 0) GTEST_SKIP() << "no private mount namespace here (unshare -m)";
    v_ = std::make_unique<MountedVault>(not_mounted());
    write_file(v_->cipherdir() + "/../fstab", "");
    v_->mount();
    write_file(v_->path("hello"), "from the vault\n");
    v_->unmount();
  }
  std::string fstab() const { return v_->cipherdir() + "/../fstab"; }
  // Runs script in a private mount namespace where `gpucryptfs` is on mount.fuse3's PATH; the
  // namespace's mounts end with it (the script unmounts what it mounted, also on failure).
  CommandResult in_namespace(const std::string& script) const {
    const std::string setup = "mount -t tmpfs gcfs-bin /usr/local/sbin && ln -s " + q(test_binary()) +
                              " /usr/local/sbin/gpucryptfs && trap 'umount " + q(v_->mountpoint()) + " 2>/dev/null' EXIT; ";
    return run_shell("unshare -m bash -c " + q(setup + script));
  }
  std::string line(const std::string& options) const {
    return v_->cipherdir() + " " + v_->mountpoint() + " fuse.gpucryptfs " + options + " 0 0\n";
  }
  std::unique_ptr<MountedVault> v_;
};

TEST_F(Fstab, MountDashTMountsAnFstabLineThroughMountFuse3) {
  write_file(fstab(), "# a comment\n" + line("passfile=" + v_->passfile() + ",engine=cpu,log=" + v_->log_path() +
                                            ",allow_other,default_permissions,nofail,_netdev,x-systemd.automount,noexec"));
  const CommandResult r = in_namespace("mount -T " + q(fstab()) + " " + q(v_->mountpoint()) + " && cat " +
                                       q(v_->path("hello")) + " && grep ' " + v_->mountpoint() + " ' /proc/self/mounts && umount " +
                                       q(v_->mountpoint()));
  ASSERT_EQ(r.status, 0) << r.output << "\nlog:\n" << v_->log();
  EXPECT_NE(r.output.find("from the vault"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fuse.gpucryptfs rw,nosuid,nodev,noexec"), std::string::npos)
      << "noexec passed through, nodev and nosuid kept although mount.fuse3 adds dev,suid: " << r.output;
  EXPECT_NE(r.output.find("allow_other"), std::string::npos) << r.output;
}

TEST_F(Fstab, MountDashAMountsEveryLineAndReadOnlyIsHonoured) {
  write_file(fstab(), line("passfile=" + v_->passfile() + ",ro,engine=cpu,log=" + v_->log_path()));
  const CommandResult r = in_namespace("mount -a -T " + q(fstab()) + " && cat " + q(v_->path("hello")) + " && ! touch " +
                                       q(v_->path("new")) + " 2>/dev/null && umount " + q(v_->mountpoint()));
  EXPECT_EQ(r.status, 0) << r.output << "\nlog:\n" << v_->log();
  EXPECT_NE(r.output.find("from the vault"), std::string::npos) << r.output;
}

TEST_F(Fstab, AnUnknownOptionIsRefusedByNameAndNothingIsMounted) {
  write_file(fstab(), line("passfile=" + v_->passfile() + ",engine=cpu,compresion=lz4"));
  const CommandResult r = in_namespace("mount -T " + q(fstab()) + " " + q(v_->mountpoint()) + "; echo status=$?; grep -c ' " +
                                       v_->mountpoint() + " ' /proc/self/mounts");
  EXPECT_NE(r.output.find("unknown mount option 'compresion=lz4'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("status=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n0\n"), std::string::npos) << r.output;
}

// What mount.fuse3 (fuse3 3.14 on Debian 12) runs for a fuse.gpucryptfs line, seen by a script in
// gpucryptfs's place on its PATH: the form mount/cli/fstab_args.h parses, nofail and _netdev dropped,
// dev and suid added.
TEST(MountHelper, MountFuse3RunsGpucryptfsWithSourceMountpointAndDashO) {
  GCFS_REQUIRE_PROGRAM("mount.fuse3");
  TempDir t("gcfs-helper");
  ::mkdir((t.path() + "/bin").c_str(), 0755);
  ::mkdir((t.path() + "/mnt").c_str(), 0755);
  write_file(t.path() + "/bin/gpucryptfs", "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " +
                                               q(t.path() + "/argv") + "\n");
  ::chmod((t.path() + "/bin/gpucryptfs").c_str(), 0755);
  const CommandResult r = run_shell("PATH=" + q(t.path() + "/bin") + ":$PATH mount.fuse3 /srv/vault " + q(t.path() + "/mnt") +
                                    " -o passfile=/pw,ro,nofail,_netdev,engine=cpu -t fuse.gpucryptfs");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string argv = read_file(t.path() + "/argv");
  EXPECT_EQ(argv.substr(0, argv.find("-o\n") + 3), "/srv/vault\n" + t.path() + "/mnt\n-o\n") << argv;
  const std::string opts = argv.substr(argv.find("-o\n") + 3);
  for (const char* o : {"passfile=/pw", "ro", "engine=cpu"}) EXPECT_NE(opts.find(o), std::string::npos) << opts;
  EXPECT_EQ(opts.find("nofail"), std::string::npos) << opts;
}

// The form mount.fuse3 uses, run directly (also what a mount.fuse.gpucryptfs link receives).
TEST(MountHelper, TheMountFuse3CommandLineMountsAndRefusesTyposByName) {
  MountedVault v(not_mounted());
  const std::string helper = test_binary() + " " + q(v.cipherdir()) + " " + q(v.mountpoint()) + " -o ";
  CommandResult r = run_shell(helper + "passfile=" + q(v.passfile()) + ",engine=cpu,nofial </dev/null");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("unknown mount option 'nofial'"), std::string::npos) << r.output;
  r = run_shell(helper + "passfile=" + q(v.passfile()) + ",engine=cpu,log=" + q(v.log_path()) + ",dev,suid");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(listed(v.mountpoint()));
  write_file(v.path("f"), "x");
  EXPECT_EQ(read_file(v.path("f")), "x");
  EXPECT_EQ(run_shell(MountedVault::unmount_command(false) + q(v.mountpoint())).status, 0);
}

TEST(Idle, AnUnusedMountGoesAndAnOpenFileKeepsIt) {
  std::vector<std::string> args = test_mount_args();
  args.insert(args.end(), {"--idle", "1s"});
  VaultOptions o;
  o.mount_args = args;
  MountedVault v(o);
  write_file(v.path("f"), "data");
  {
    // An open file keeps the mount however long nobody reads it.
    const int fd = ::open(v.path("f").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    EXPECT_TRUE(listed(v.mountpoint()));
    ::close(fd);
  }
  // Requests keep it too.
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(read_file(v.path("f")), "data");
  }
  EXPECT_TRUE(listed(v.mountpoint()));
  bool gone = false;
  for (int i = 0; i < 60 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = !listed(v.mountpoint());
  }
  EXPECT_TRUE(gone) << "still mounted 6 s after the last use of a mount with --idle 1s";
  EXPECT_NE(v.log().find("unused for 1 second (--idle): unmounting"), std::string::npos) << v.log();
}

TEST(Idle, ABadDurationIsAUsageError) {
  MountedVault v(not_mounted());
  const CommandResult r = run_shell(test_binary() + " mount --idle 5parsecs --passfile " + q(v.passfile()) + " " +
                                    q(v.cipherdir()) + " " + q(v.mountpoint()));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--idle 5parsecs"), std::string::npos) << r.output;
}

TEST(ConfigOutside, EveryCommandFindsTheConfigWhereItWasPut) {
  TempDir root("gcfs-config");
  const std::string c = root.path() + "/cipher", m = root.path() + "/plain", conf = root.path() + "/keep/vault.conf",
                    pw = root.path() + "/pw", pw2 = root.path() + "/pw2", log = root.path() + "/log";
  for (const auto& d : {c, m, root.path() + "/keep"}) ::mkdir(d.c_str(), 0700);
  write_file(pw, "pw one\n");
  write_file(pw2, "pw two\n");
  const std::string bin = test_binary(), cfg = " --config " + q(conf) + " ";
  ASSERT_EQ(run_shell(bin + " init --quiet --scrypt-logn 10 --passfile " + q(pw) + cfg + q(c)).status, 0);
  EXPECT_EQ(::access((c + "/gpucryptfs.conf").c_str(), F_OK), -1) << "no config in CIPHERDIR";
  EXPECT_EQ(::access(conf.c_str(), F_OK), 0);
  EXPECT_EQ(run_shell(bin + " info " + q(c)).status, 23) << "without --config the vault has no config";
  const CommandResult info = run_shell(bin + " info" + cfg + q(c));
  EXPECT_EQ(info.status, 0) << info.output;
  EXPECT_NE(info.output.find("Config:       " + conf), std::string::npos) << info.output;
  ASSERT_EQ(run_shell(bin + " passwd --passfile " + q(pw) + " --new-passfile " + q(pw2) + cfg + q(c)).status, 0);
  EXPECT_EQ(::access((c + "/gpucryptfs.conf").c_str(), F_OK), -1);
  const std::string mount = bin + " mount --engine cpu --log " + q(log) + " --passfile " + q(pw2) + cfg + q(c) + " " + q(m);
  ASSERT_EQ(run_shell(mount).status, 0);
  write_file(m + "/f", "kept apart");
  EXPECT_EQ(run_shell(MountedVault::unmount_command(false) + q(m)).status, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const CommandResult fsck = run_shell(bin + " fsck --passfile " + q(pw2) + cfg + q(c));
  EXPECT_EQ(fsck.status, 0) << fsck.output;
  ::mkdir((root.path() + "/empty").c_str(), 0700);
  EXPECT_EQ(run_shell(bin + " init --quiet --scrypt-logn 10 --passfile " + q(pw) + " --config " + q(root.path() + "/x/y.conf") +
                      " " + q(root.path() + "/empty")).status, 2)
      << "a --config whose directory is missing is a usage error";
}

TEST(Nonempty, RefusedUnlessAskedFor) {
  MountedVault v(not_mounted());
  write_file(v.mountpoint() + "/underneath", "hidden while mounted");
  const std::string mount = test_binary() + " mount --engine cpu --passfile " + q(v.passfile()) + " --log " + q(v.log_path()) +
                            " ";
  const CommandResult refused = run_shell(mount + q(v.cipherdir()) + " " + q(v.mountpoint()));
  EXPECT_EQ(refused.status, 10) << refused.output;
  EXPECT_NE(refused.output.find("--nonempty"), std::string::npos) << refused.output;
  ASSERT_EQ(run_shell(mount + "--nonempty " + q(v.cipherdir()) + " " + q(v.mountpoint())).status, 0);
  EXPECT_NE(::access((v.mountpoint() + "/underneath").c_str(), F_OK), 0);
  EXPECT_EQ(run_shell(MountedVault::unmount_command(false) + q(v.mountpoint())).status, 0);
  EXPECT_EQ(read_file(v.mountpoint() + "/underneath"), "hidden while mounted");
}

}  // namespace
}  // namespace gcfs::test
