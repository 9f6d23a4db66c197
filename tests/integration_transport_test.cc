// --transport end to end: the log names the transport that serves and why, `uring` refuses to
// mount where the kernel's switch is off (with the command that turns it on), a bad value is a
// usage error, and a mount over io_uring answers requests from every CPU (the kernel places each
// request on the queue of the CPU that issued it).
#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::string uring_switch() {
  std::ifstream in("/sys/module/fuse/parameters/enable_uring");
  std::string v;
  if (!(in >> v)) return "";
  return v;
}

TEST(Transport, LogSaysWhichTransportServes) {
  MountedVault v;
  const std::string log = v.log();
  if (test_transport() == "uring") {
    EXPECT_NE(log.find("transport: io_uring, "), std::string::npos) << log;
  } else if (test_transport() == "classic") {
    EXPECT_NE(log.find("transport: /dev/fuse, because --transport classic"), std::string::npos) << log;
  } else {
    EXPECT_NE(log.find("transport: "), std::string::npos) << log;
  }
  write_file(v.path("f"), "ring or not");
  EXPECT_EQ(read_file(v.path("f")), "ring or not");
}

TEST(Transport, RequestsFromEveryCpuAreAnswered) {
  GCFS_REQUIRE_PROGRAM("taskset");
  MountedVault v;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < cpus && c < 8; ++c) {
    // taskset puts the writer on CPU c: with io_uring its requests land on queue c.
    const std::string name = "cpu" + std::to_string(c);
    auto r = v.sh("taskset -c " + std::to_string(c) + " sh -c 'head -c 300000 /dev/urandom > " + name +
                  " && cat " + name + " | wc -c'");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output, "300000\n") << "cpu " << c;
  }
}

TEST(Transport, BadValueIsAUsageError) {
  VaultOptions o;
  o.mount = false;
  MountedVault v(o);
  auto r = run_shell(v.binary() + " mount --transport fast --passfile " + shell_quote(v.passfile()) + " " +
                     shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint()));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--transport fast: choose auto, uring or classic"), std::string::npos) << r.output;
}

TEST(Transport, UringRefusesWhereTheSwitchIsOff) {
  const std::string s = uring_switch();
  if (s == "Y" || s == "1") GTEST_SKIP() << "io_uring is on in this kernel: nothing to refuse";
  VaultOptions o;
  o.mount = false;
  MountedVault v(o);
  auto r = run_shell(v.binary() + " mount --engine cpu --transport uring --passfile " + shell_quote(v.passfile()) + " " +
                     shell_quote(v.cipherdir()) + " " + shell_quote(v.mountpoint()));
  EXPECT_NE(r.status, 0) << r.output;
  const std::string expected = s.empty() ? "this kernel has no FUSE over io_uring"
                                         : "io_uring is off in this kernel: echo 1 > /sys/module/fuse/parameters/enable_uring";
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  EXPECT_FALSE(v.in_mount_table());
  // auto falls back to /dev/fuse and says why.
  auto m = run_shell(v.binary() + " mount --engine cpu --transport auto --log " + shell_quote(v.log_path()) +
                     " --passfile " + shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()) + " " +
                     shell_quote(v.mountpoint()));
  ASSERT_EQ(m.status, 0) << m.output;
  EXPECT_NE(v.log().find("transport: /dev/fuse, because " + expected), std::string::npos) << v.log();
  run_shell(MountedVault::unmount_command(false) + shell_quote(v.mountpoint()));
}

}  // namespace
}  // namespace gcfs::test
