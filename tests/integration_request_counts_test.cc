// How many FUSE requests everyday work costs on a mount: each one is a round trip through the
// daemon, so a request per file that the kernel could have done without is time lost on every
// scan. Counted from the kernel's fuse_request_send tracepoint (kernel 6.15 and newer) in a
// tracefs instance of the test's own, for the test mount's connection only; where there is no
// such tracepoint, or no root to use it, the tests skip and say so.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

constexpr const char* kTracing = "/sys/kernel/tracing";

// Records the requests the kernel sends to one FUSE mount while alive.
class RequestCounter {
 public:
  // Empty when requests cannot be counted here (why()).
  explicit RequestCounter(const std::string& mountpoint) {
    if (::geteuid() != 0) {
      why_ = "counting FUSE requests needs root (tracefs)";
      return;
    }
    if (::access((std::string(kTracing) + "/events/fuse/fuse_request_send").c_str(), F_OK) != 0) {
      why_ = "this kernel has no fuse_request_send tracepoint (6.15 or newer has it)";
      return;
    }
    struct stat st {};
    if (::stat(mountpoint.c_str(), &st) != 0) {
      why_ = "cannot stat the mount";
      return;
    }
    // The tracepoint names the connection by the kernel's dev_t: major << 20 | minor.
    connection_ = "connection " + std::to_string((static_cast<unsigned long>(major(st.st_dev)) << 20) | minor(st.st_dev)) + " ";
    instance_ = std::string(kTracing) + "/instances/gcfs_test_" + std::to_string(::getpid());
    if (::mkdir(instance_.c_str(), 0700) != 0) {
      why_ = "cannot make a tracefs instance";
      instance_.clear();
      return;
    }
    write_file(instance_ + "/buffer_size_kb", "8192");
    write_file(instance_ + "/events/fuse/fuse_request_send/enable", "1");
  }
  ~RequestCounter() {
    if (instance_.empty()) return;
    write_file(instance_ + "/events/fuse/fuse_request_send/enable", "0");
    ::rmdir(instance_.c_str());
  }
  RequestCounter(const RequestCounter&) = delete;

  bool ok() const { return !instance_.empty(); }
  const std::string& why() const { return why_; }

  // Forgets what was recorded so far.
  void reset() { write_file(instance_ + "/trace", ""); }

  // Requests recorded since the last reset, by opcode name (LOOKUP, GETATTR, ...).
  std::map<std::string, int> counts() const {
    std::map<std::string, int> out;
    std::istringstream in(read_file(instance_ + "/trace"));
    for (std::string line; std::getline(in, line);) {
      if (line.find(connection_) == std::string::npos) continue;
      auto b = line.find("(FUSE_");
      auto e = line.find(')', b);
      if (b != std::string::npos && e != std::string::npos) ++out[line.substr(b + 6, e - b - 6)];
    }
    return out;
  }

 private:
  std::string why_, connection_, instance_;
};

std::string describe(const std::map<std::string, int>& counts) {
  std::string s;
  for (const auto& [op, n] : counts) s += op + "=" + std::to_string(n) + " ";
  return s;
}

// `find -ls` and `ls -l` stat every entry they list. With READDIRPLUS the listing carries the
// attributes; the old mount let the kernel fall back to plain READDIR after a directory's first
// reply (READDIRPLUS_AUTO), and then each stat was a LOOKUP: about 0.8 per file in a directory
// of 1000.
TEST(RequestCounts, ListingAndStattingALargeDirectoryCostsNoRequestPerFile) {
  MountedVault v;
  constexpr int kFiles = 800;
  ASSERT_EQ(v.sh("mkdir big && cd big && for i in $(seq " + std::to_string(kFiles) + "); do : > file-with-a-longish-name-$i; done").status, 0);
  v.remount();  // nothing of the directory is cached in the kernel now
  RequestCounter counter(v.mountpoint());
  if (!counter.ok()) GTEST_SKIP() << counter.why();
  counter.reset();
  auto r = v.sh("find big -ls | wc -l");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(std::stoi(r.output), kFiles + 1);
  const auto counts = counter.counts();
  const int per_file = counts.count("LOOKUP") ? counts.at("LOOKUP") : 0;
  const int getattrs = counts.count("GETATTR") ? counts.at("GETATTR") : 0;
  EXPECT_LT(per_file + getattrs, kFiles / 20) << describe(counts);
  EXPECT_GT(counts.count("READDIRPLUS") ? counts.at("READDIRPLUS") : 0, 1) << describe(counts);
}

// Before every buffered write the kernel asked whether the file has security.capability (a
// GETXATTR round trip per WRITE: 2 to 3% of a 1 MiB write's time on the development VM). With
// FUSE_HANDLE_KILLPRIV_V2 the daemon clears the setid bits itself, and the kernel asks once per
// file until its attributes change.
TEST(RequestCounts, AStreamOfWritesAsksForSecurityCapabilityOncePerFile) {
  MountedVault v;
  RequestCounter counter(v.mountpoint());
  if (!counter.ok()) GTEST_SKIP() << counter.why();
  counter.reset();
  auto r = v.sh("for f in stream stream2; do dd if=/dev/zero of=$f bs=64k count=64 status=none || exit 1; done");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto counts = counter.counts();
  const int writes = counts.count("WRITE") ? counts.at("WRITE") : 0;
  const int getxattrs = counts.count("GETXATTR") ? counts.at("GETXATTR") : 0;
  // 128 WRITEs of 64 KiB; with the writeback cache (the wb. variant) the kernel gathers them into
  // fewer, larger ones, still several per file: enough that one GETXATTR each would show.
  EXPECT_GE(writes, 8) << describe(counts);
  EXPECT_LE(getxattrs, 2) << describe(counts);
}

// Closing a file costs no round trip: writes are on the ciphertext before they are answered, so
// FLUSH had nothing to do, and it was a quarter of the requests of reading a tree of small files
// (OPEN, READ, FLUSH, RELEASE). With the writeback cache (the wb. variant) the kernel sends the
// first FLUSH all the same and stops at its ENOSYS.
TEST(RequestCounts, WritingAndReadingFilesSendsNoFlushAtClose) {
  MountedVault v;
  RequestCounter counter(v.mountpoint());
  if (!counter.ok()) GTEST_SKIP() << counter.why();
  counter.reset();
  auto r = v.sh("for i in $(seq 20); do echo content-$i > f$i || exit 1; done && cat f* | wc -l");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "20\n");
  const auto counts = counter.counts();
  const int opens = (counts.count("OPEN") ? counts.at("OPEN") : 0) + (counts.count("CREATE") ? counts.at("CREATE") : 0);
  EXPECT_GE(opens, 20) << describe(counts);
  EXPECT_LE(counts.count("FLUSH") ? counts.at("FLUSH") : 0, 1) << describe(counts);
  // Each file's content is still there after the daemon let go of it.
  v.remount();
  EXPECT_EQ(read_file(v.path("f7")), "content-7\n");
}

// The mtime the kernel's writeback cache sends after a written file, and a SETATTR of the mtime
// alone while the file is open (tar), are kept and written to the backing file at the last close
// (one backing call less per file on a network share): every stat shows them meanwhile, a
// remount finds them, and an fsync makes them as durable as the data.
std::string mtime_of(MountedVault& v, const std::string& rel) { return v.sh("stat -c %Y " + rel).output; }

TEST(KeptTimes, AnMtimeSetWhileOpenIsShownAtOnceAndKeptAfterClose) {
  MountedVault v;
  auto r = v.sh("exec 3>f && echo data >&3 && touch -m -d @1000000000 f && stat -c %Y f && exec 3>&- && stat -c %Y f");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "1000000000\n1000000000\n");
  v.remount();
  EXPECT_EQ(mtime_of(v, "f"), "1000000000\n");
  EXPECT_EQ(v.sh("cat f").output, "data\n");
  // A backing stat sees it too once the file is closed: it is on the ciphertext file.
  auto backing = run_shell("find " + shell_quote(v.cipherdir()) + " -type f ! -name 'gpucryptfs.*' -printf '%T@\\n' | cut -d. -f1");
  EXPECT_EQ(backing.output, "1000000000\n");
}

TEST(KeptTimes, AnFsyncMakesAKeptMtimeDurable) {
  MountedVault v;
  // The file stays open in a background shell while the daemon is killed.
  TempDir scratch("gcfs-kept-times");
  const std::string out = shell_quote(scratch.path() + "/out"), pid = shell_quote(scratch.path() + "/pid");
  // (After the "cd" that v.sh puts first: only the subshell goes to the background.)
  auto r = v.sh(": ; (exec 3>f; echo data >&3; touch -m -d @1100000000 f; sync f; echo synced; exec sleep 30) > " + out +
                " 2>&1 & echo $! > " + pid + "; for i in $(seq 100); do grep -q synced " + out +
                " 2>/dev/null && break; sleep 0.1; done; cat " + out);
  ASSERT_EQ(r.output, "synced\n");
  ASSERT_EQ(::kill(v.daemon_pid(), SIGKILL), 0);
  run_shell("kill $(cat " + pid + ")");  // the holder of the open file, by its pid
  v.remount();
  EXPECT_EQ(mtime_of(v, "f"), "1100000000\n");
  EXPECT_EQ(v.sh("cat f").output, "data\n");
}

// After the last name of a file is gone, the times the kernel flushes for it get no backing call
// unless someone still holds it open: then they still apply, as to any open file.
TEST(KeptTimes, AnUnlinkedFileStillOpenTakesTheTimesItIsGiven) {
  MountedVault v;
  auto r = v.sh("exec 3<>f && echo data >&3 && rm f && touch -a -d @1200000000 /proc/self/fd/3 && "
                "stat -L -c %X /proc/self/fd/3 && echo gone");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "1200000000\ngone\n");
}

}  // namespace
}  // namespace gcfs::test
