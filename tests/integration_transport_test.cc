// --transport end to end: the log names the transport that serves and why, `uring` refuses to
// mount where the kernel's switch is off (with the command that turns it on), a bad value is a
// usage error, and a mount over io_uring answers requests from every CPU (the kernel places each
// request on the queue of the CPU that issued it). Where io_uring cannot be set up for any other
// reason (io_uring_setup refused, the kernel refusing a ring entry), auto falls back to /dev/fuse
// and uring refuses, both with the one-line reason.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "support/mounted_vault.h"

#ifndef GCFS_DENY_IO_URING
#error "GCFS_DENY_IO_URING must name the wrapper that fails io_uring_setup"
#endif

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

bool uring_switch_on() {
  const std::string s = uring_switch();
  return s == "Y" || s == "1";
}

// The kernel's CPU queues: one per possible CPU.
unsigned possible_cpus() {
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string list;
  std::getline(in, list);
  unsigned count = 0, a = 0, b = 0;
  char sep = 0;
  std::istringstream ss(list);
  while (ss >> a) {
    b = a;
    if (ss.peek() == '-') ss >> sep >> b;
    count += b - a + 1;
    if (ss.peek() == ',') ss >> sep;
  }
  return count;
}

// One way the io_uring transport cannot be had although the kernel's switch is on: a prefix for
// the mount command that brings it about, and the reason the log and the refusal must give.
struct Obstacle {
  const char* name;
  const char* deny_errno;  // io_uring_setup fails with it (the deny_io_uring wrapper); or null
  std::string prefix;      // else this before the mount command
  std::string reason;
};

void PrintTo(const Obstacle& o, std::ostream* os) { *os << o.name; }

// The wrapper that fails io_uring_setup: GPUCRYPTFS_TEST_DENY_IO_URING where the suite runs away
// from its build (the GPU machine's carry), else the one this build made.
std::string deny_io_uring() {
  const char* e = std::getenv("GPUCRYPTFS_TEST_DENY_IO_URING");
  return e && *e ? e : GCFS_DENY_IO_URING;
}

class TransportFallback : public ::testing::TestWithParam<Obstacle> {};

// auto falls back to /dev/fuse, serves, and logs the one-line reason; uring refuses to mount with
// it (non-zero exit, nothing mounted).
TEST_P(TransportFallback, AutoFallsBackAndUringRefusesWithTheReason) {
  if (!uring_switch_on()) GTEST_SKIP() << "io_uring is off in this kernel: the switch is the reason here";
  GCFS_REQUIRE_PROGRAM("taskset");
  const Obstacle& ob = GetParam();
  if (std::string(ob.name) == "RefusedBeforeTheLastQueue" && possible_cpus() < 2)
    GTEST_SKIP() << "one CPU queue: no entry is registered before the one that completes the ring";
  VaultOptions o;
  o.mount = false;
  o.shell_prefix = ob.prefix;
  if (ob.deny_errno) {
    if (::access(deny_io_uring().c_str(), X_OK) != 0) GTEST_SKIP() << deny_io_uring() << " is not here";
    o.shell_prefix = deny_io_uring() + " " + ob.deny_errno + " ";
  }
  o.transport = "uring";
  MountedVault refused(o);
  auto r = run_shell(refused.mount_command());
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--transport uring: " + ob.reason), std::string::npos) << r.output << refused.log();
  EXPECT_FALSE(refused.in_mount_table());

  o.transport = "auto";
  o.mount = true;
  MountedVault v(o);
  const std::string log = v.log();
  EXPECT_NE(log.find("transport: /dev/fuse, because " + ob.reason), std::string::npos) << log;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < cpus && c < 4; ++c) {  // every CPU's requests reach /dev/fuse
    auto w = v.sh("taskset -c " + std::to_string(c) + " sh -c 'head -c 200000 /dev/urandom > f && wc -c < f'");
    EXPECT_EQ(w.output, "200000\n") << "cpu " << c << ": " << w.output;
  }
  v.remount();
  EXPECT_EQ(v.sh("wc -c < f").output, "200000\n");
}

INSTANTIATE_TEST_SUITE_P(
    Transport, TransportFallback,
    ::testing::Values(
        // io_uring_setup refused: kernel.io_uring_disabled=2 (EPERM), out of descriptors, memory.
        Obstacle{"IoUringDisabled", "EPERM", "", "cannot create an io_uring: Operation not permitted"},
        Obstacle{"NoDescriptorForTheRing", "EMFILE", "", "cannot create an io_uring: Too many open files"},
        Obstacle{"NoMemoryForTheRing", "ENOMEM", "", "cannot create an io_uring: Cannot allocate memory"},
        // The kernel refuses a REGISTER after INIT asked for io_uring: before the ring is
        // complete it switches io_uring off for the connection, and /dev/fuse takes over.
        Obstacle{"RefusedBeforeTheLastQueue", nullptr, "GPUCRYPTFS_TEST_URING_REFUSE=others ",
                 "the kernel refused a ring entry's registration (queue 0): Invalid argument"},
        Obstacle{"RefusedWhereItWouldComplete", nullptr, "GPUCRYPTFS_TEST_URING_REFUSE=completing ",
                 "the kernel refused a ring entry's registration (queue " + std::to_string(possible_cpus() - 1) +
                     "): Invalid argument"}),
    [](const auto& info) { return std::string(info.param.name); });

// Once every CPU queue has an entry the ring serves for good: an entry refused after that costs
// only itself. Both auto and uring mount over io_uring, say so, and answer every CPU.
TEST(Transport, AnEntryRefusedAfterTheRingIsCompleteCostsOnlyItself) {
  if (!uring_switch_on()) GTEST_SKIP() << "io_uring is off in this kernel";
  GCFS_REQUIRE_PROGRAM("taskset");
  for (const char* transport : {"auto", "uring"}) {
    VaultOptions o;
    o.shell_prefix = "GPUCRYPTFS_TEST_URING_REFUSE=rest ";
    o.transport = transport;
    MountedVault v(o);
    const std::string log = v.log();
    EXPECT_NE(log.find("the ring serves with its other entries"), std::string::npos) << transport << ": " << log;
    EXPECT_NE(log.find("transport: io_uring, "), std::string::npos) << transport << ": " << log;
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < cpus && c < 8; ++c) {
      auto w = v.sh("taskset -c " + std::to_string(c) + " sh -c 'head -c 200000 /dev/urandom > f && wc -c < f'");
      EXPECT_EQ(w.output, "200000\n") << transport << " cpu " << c << ": " << w.output;
    }
  }
}

}  // namespace
}  // namespace gcfs::test
