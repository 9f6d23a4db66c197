// Faults through a real mount (tests/support/mounted_vault.h): the daemon killed with SIGKILL in
// the middle of concurrent writes, a backing folder that runs out of space, and many threads and
// processes writing and reading the same and different files at once, checked against a serial
// model. fsck (the CLI) runs over the ciphertext afterwards.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

constexpr std::size_t kChunk = 4096;

VaultOptions small_chunks() {
  VaultOptions o;
  o.chunk_size = kChunk;
  return o;
}

// Deterministic bytes for (stream, position): any byte can be recomputed by the checker.
std::uint8_t byte_at(std::uint32_t stream, std::uint64_t pos) {
  std::uint64_t x = (static_cast<std::uint64_t>(stream) << 40) ^ (pos * 0x9E3779B97F4A7C15ull);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<std::uint8_t>(x);
}

std::string bytes(std::uint32_t stream, std::uint64_t pos, std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(byte_at(stream, pos + i));
  return s;
}

bool pwrite_all(int fd, const std::string& s, std::uint64_t off) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::pwrite(fd, s.data() + done, s.size() - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::string pread_str(int fd, std::uint64_t off, std::size_t n, int* err = nullptr) {
  std::string s(n, '\0');
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, s.data() + done, n - done, static_cast<off_t>(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      if (err) *err = errno;
      return {};
    }
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  s.resize(done);
  return s;
}

CommandResult fsck(const MountedVault& v) {
  return run_shell(v.binary() + " fsck --passfile " + shell_quote(v.passfile()) + " " + shell_quote(v.cipherdir()));
}

// The pid of the process serving v's mount: the fixture's, or found in /proc by its command line.
pid_t serving_pid(const MountedVault& v) {
  if (v.daemon_pid() > 0) return v.daemon_pid();
  const CommandResult r = run_shell("for p in /proc/[0-9]*; do [ ${p#/proc/} = $$ ] && continue; tr '\\0' ' ' 2>/dev/null < $p/cmdline | grep -q -- " +
                                    shell_quote(" mount .*" + v.mountpoint()) + " && echo ${p#/proc/}; done");
  std::istringstream in(r.output);
  pid_t pid = -1;
  in >> pid;
  return pid;
}

// The fsyncs the writers have had answered; the test SIGKILLs the daemon once enough are in.
struct FsyncGate {
  std::atomic<int> fsyncs{0};
  std::mutex mu;
  std::condition_variable cv;
  void answered(int enough) {
    if (fsyncs.fetch_add(1) + 1 >= enough) {
      std::lock_guard lk(mu);
      cv.notify_all();
    }
  }
  // Waits for `enough` answered fsyncs, then SIGKILLs the serving daemon. Returns its pid (not
  // positive where none was found) and kill's result (-1 then).
  std::pair<pid_t, int> kill_daemon_after(const MountedVault& v, int enough) {
    {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return fsyncs.load() >= enough; });
    }
    const pid_t daemon = serving_pid(v);
    return {daemon, daemon > 0 ? ::kill(daemon, SIGKILL) : -1};
  }
};

// fsck over v's CIPHERDIR after a kill: clean, or damage only in chunks that lie wholly past the
// fsynced size of the file they belong to ("file" N: fsynced[N]), fresh chunks the kill tore while
// they were being appended, never acknowledged.
void expect_damage_only_past_fsynced(const MountedVault& v, const std::vector<std::uint64_t>& fsynced) {
  const CommandResult r = fsck(v);
  EXPECT_TRUE(r.status == 0 || r.status == 26) << r.output;
  std::istringstream out(r.output);
  std::vector<std::uint64_t> chunks;  // of the last "problem:" line
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("problem: ", 0) == 0) {
      chunks.clear();
      std::string runs;
      if (line.find("a write cut short") != std::string::npos) {
        // A file that ends in a fragment (an append cut short between its entries and its data,
        // or between pages): the mount reads its whole chunks; any of those that fail are named
        // after "also chunks".
        const std::size_t also = line.find("also chunks ");
        if (also == std::string::npos) continue;
        runs = line.substr(also + 12, line.find(" fail", also) - also - 12);
      } else {
        // "problem: chunk 7 of 9 ..." or "problem: chunks 7..8, 10 of 12 ..."
        const std::size_t at = line.find("chunk");
        const std::size_t of = line.find(" of ", at);
        ASSERT_TRUE(at != std::string::npos && of != std::string::npos) << "not a damaged-chunk problem:\n" << r.output;
        runs = line.substr(line.find(' ', at) + 1, of - line.find(' ', at) - 1);
      }
      std::istringstream rs(runs);
      for (std::string run; std::getline(rs, run, ',');) {
        unsigned long long a = 0, b = 0;
        if (std::sscanf(run.c_str(), " %llu..%llu", &a, &b) == 2)
          for (auto k = a; k <= b; ++k) chunks.push_back(k);
        else if (std::sscanf(run.c_str(), " %llu", &a) == 1)
          chunks.push_back(a);
      }
      continue;
    }
    if (line.rfind("  plaintext:", 0) != 0) continue;
    const std::size_t f = line.find("/file");
    ASSERT_NE(f, std::string::npos) << "damage outside the files being written:\n" << r.output;
    const int w = std::atoi(line.c_str() + f + 5);
    ASSERT_TRUE(w >= 0 && static_cast<std::size_t>(w) < fsynced.size()) << line;
    for (std::uint64_t k : chunks)
      EXPECT_GE(k * kChunk, fsynced[static_cast<std::size_t>(w)])
          << "file" << w << ": chunk " << k << " holds fsynced bytes and is damaged:\n" << r.output;
  }
}

// ---------------------------------------------------------------------------------------------
// SIGKILL during heavy concurrent writes.

TEST(FaultMount, SigkillDuringConcurrentWritesKeepsEverythingFsynced) {
  MountedVault v(small_chunks());
  constexpr int kWriters = 4;
  constexpr std::size_t kRecord = 10000;  // not chunk-aligned: appends rewrite partial chunks
  constexpr int kFsyncsBeforeKill = 12;   // the kill comes once this many fsyncs are acknowledged
  std::atomic<std::uint64_t> acked[kWriters] = {};
  std::atomic<bool> killed{false};
  FsyncGate gate;

  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      const std::string path = v.path("file" + std::to_string(w));
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) return;
      std::uint64_t written = 0;
      for (int i = 0; !killed.load(); ++i) {
        if (!pwrite_all(fd, bytes(w, written, kRecord), written)) break;
        written += kRecord;
        if (i % 3 == 2) {
          if (::fsync(fd) != 0) break;
          acked[w].store(written);  // from here on these bytes must survive
          gate.answered(kFsyncsBeforeKill);
        }
        if (written > (64u << 20)) break;  // a bound, in case the kill never comes
      }
      ::close(fd);
    });
  }
  const auto [daemon, kill_rc] = gate.kill_daemon_after(v, kFsyncsBeforeKill);
  killed = true;
  for (auto& t : writers) t.join();
  ASSERT_GT(daemon, 0) << "cannot find the daemon's pid";
  ASSERT_EQ(kill_rc, 0) << std::strerror(errno);

  v.remount();  // unmounts the dead mount (fusermount3 -u) and mounts again
  // Every fsynced byte reads back exactly, the last partial chunk included. That chunk is
  // rewritten in place by the next append; when the kill tears that rewrite, the mount puts it
  // back from the crash journal before serving (docs/SECURITY.md, "Crash consistency").
  for (int w = 0; w < kWriters; ++w) {
    const std::uint64_t n = acked[w].load();
    if (n == 0) continue;  // this writer had not fsynced anything yet (or not even started)
    int fd = ::open(v.path("file" + std::to_string(w)).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << "file" << w;
    int err = 0;
    const std::string got = pread_str(fd, 0, n, &err);
    ::close(fd);
    ASSERT_EQ(err, 0) << "file" << w << ": reading the " << n << " fsynced bytes failed: " << std::strerror(err)
                      << "\nlog:\n" << v.log();
    ASSERT_EQ(got.size(), n) << "file" << w;
    EXPECT_TRUE(got == bytes(w, 0, n)) << "file" << w << ": fsynced bytes differ after the kill";
  }
  // How often the kill tore a journaled rewrite (the log names each chunk put back).
  int restored = 0;
  {
    std::istringstream log(v.log());
    for (std::string line; std::getline(log, line);)
      if (line.find("from the crash journal") != std::string::npos) ++restored;
  }
  ::testing::Test::RecordProperty("chunks_restored_from_journal", restored);
  v.unmount();
  std::vector<std::uint64_t> fsynced;
  for (const auto& n : acked) fsynced.push_back(n.load());
  expect_damage_only_past_fsynced(v, fsynced);
}

// SIGKILL in a stream of 1 MiB writes: each is sealed and written in parts (the cpu engine's
// helpers seal later parts while earlier ones are written), so the kill lands between the parts
// of a write, or inside one.
TEST(FaultMount, SigkillDuringAStreamOfLargeWritesKeepsEverythingFsynced) {
  MountedVault v(small_chunks());
  constexpr std::size_t kRecord = 1u << 20;
  constexpr int kFsyncsBeforeKill = 4;
  std::atomic<std::uint64_t> acked{0};
  std::atomic<bool> killed{false};
  FsyncGate gate;
  std::thread writer([&] {
    int fd = ::open(v.path("file0").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    std::uint64_t written = 0;
    for (int i = 0; !killed.load() && written < (256u << 20); ++i) {  // a bound, in case the kill never comes
      if (!pwrite_all(fd, bytes(0, written, kRecord), written)) break;
      written += kRecord;
      if (i % 3 == 2) {
        if (::fsync(fd) != 0) break;
        acked.store(written);
        gate.answered(kFsyncsBeforeKill);
      }
    }
    ::close(fd);
  });
  const auto [daemon, kill_rc] = gate.kill_daemon_after(v, kFsyncsBeforeKill);
  killed = true;
  writer.join();
  ASSERT_GT(daemon, 0) << "cannot find the daemon's pid";
  ASSERT_EQ(kill_rc, 0) << std::strerror(errno);

  v.remount();
  const std::uint64_t n = acked.load();
  ASSERT_GE(n, kFsyncsBeforeKill * 3 * kRecord);
  int fd = ::open(v.path("file0").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  int err = 0;
  const std::string got = pread_str(fd, 0, n, &err);
  ::close(fd);
  ASSERT_EQ(err, 0) << "reading the " << n << " fsynced bytes failed: " << std::strerror(err) << "\nlog:\n" << v.log();
  ASSERT_EQ(got.size(), n);
  EXPECT_TRUE(got == bytes(0, 0, n)) << "fsynced bytes differ after the kill";
  v.unmount();
  expect_damage_only_past_fsynced(v, {n});
}

// ---------------------------------------------------------------------------------------------
// Disk full: the backing folder is a small tmpfs.

// A tmpfs of `bytes` that TMPDIR points at while it lives, so the fixture's CIPHERDIR lands on it.
class SmallBackingFs {
 public:
  explicit SmallBackingFs(std::size_t bytes) {
    char tmpl[] = "/tmp/gcfs-full-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir_ = tmpl;
    const std::string opts = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      why_ = std::string("cannot mount a tmpfs (needs root): ") + std::strerror(errno);
      ::rmdir(dir_.c_str());
      dir_.clear();
      return;
    }
    const char* old = std::getenv("TMPDIR");
    if (old) old_tmpdir_ = old, had_tmpdir_ = true;
    ::setenv("TMPDIR", dir_.c_str(), 1);
  }
  ~SmallBackingFs() {
    if (dir_.empty()) return;
    if (had_tmpdir_) ::setenv("TMPDIR", old_tmpdir_.c_str(), 1);
    else ::unsetenv("TMPDIR");
    if (::umount(dir_.c_str()) != 0) ::umount2(dir_.c_str(), MNT_DETACH);
    ::rmdir(dir_.c_str());
  }
  bool ok() const { return !dir_.empty(); }
  const std::string& why() const { return why_; }
  // Restores TMPDIR once the fixture has its folders.
  void release_tmpdir() {
    if (had_tmpdir_) ::setenv("TMPDIR", old_tmpdir_.c_str(), 1);
    else ::unsetenv("TMPDIR");
  }

 private:
  std::string dir_, why_, old_tmpdir_;
  bool had_tmpdir_ = false;
};

TEST(FaultMount, DiskFullGivesEnospcAndKeepsWhatWasWritten) {
  SmallBackingFs fs(6u << 20);
  if (!fs.ok()) GTEST_SKIP() << fs.why();
  MountedVault v(small_chunks());
  fs.release_tmpdir();

  // A file written before the disk fills, and one that fills it.
  const std::string before = bytes(1, 0, 1u << 20);
  write_file(v.path("before"), before);
  int fd = ::open(v.path("filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  // With the kernel's writeback cache a write may only reach the daemon later, so the error can
  // come from the write or from the fsync after it; what fsync acknowledged must survive.
  std::uint64_t written = 0;
  int err = 0;
  while (written < (64u << 20)) {
    const std::string block = bytes(2, written, 64 * 1024);
    if (!pwrite_all(fd, block, written) || ::fsync(fd) != 0) {
      err = errno;
      break;
    }
    written += block.size();
  }
  ASSERT_EQ(err, ENOSPC) << (err ? std::strerror(err) : "the backing tmpfs never filled");
  // Overwriting chunks that already exist needs no new space, so it still works on a full disk.
  const std::string patch = bytes(3, 0, 3 * kChunk);
  EXPECT_TRUE(pwrite_all(fd, patch, kChunk) && ::fsync(fd) == 0) << std::strerror(errno);
  ::close(fd);

  v.remount();
  EXPECT_TRUE(read_file(v.path("before")) == before) << "a file written before the disk filled changed";
  const std::string filler = read_file(v.path("filler"));
  ASSERT_GE(filler.size(), written) << "acknowledged bytes are missing";
  std::string expect = bytes(2, 0, written);
  expect.replace(kChunk, patch.size(), patch);
  EXPECT_TRUE(filler.substr(0, written) == expect) << "acknowledged bytes read back differently";
  v.unmount();
  const CommandResult r = fsck(v);
  EXPECT_EQ(r.status, 0) << r.output;
}

// ---------------------------------------------------------------------------------------------
// Many threads and processes on the same file and on different files, against a serial model.
//
// The shared file is kRecords records of kRecordBytes (not a divisor of the chunk size, so
// neighbouring records share chunks). Record r belongs to writer r % kWriters, which overwrites it
// whole, again and again, with version v = (writer, round): the serial model's final content of a
// record is its owner's last version, and at any moment a record must hold exactly one complete
// version (never a mix: a torn read-modify-write of a shared chunk would show as one). Readers
// check that while the writers run. Each writer also writes a private file of its own.
// The shared file is opened with O_DIRECT, so every request reaches the daemon whole: through the
// page cache, Linux makes no promise that a read sees a write spanning two pages all or nothing, on
// any filesystem, and such a read would look torn without any fault of gpucryptfs.

constexpr int kWriters = 6;  // half threads, half processes
constexpr int kRounds = 25;
constexpr std::size_t kRecords = 48;
constexpr std::size_t kRecordBytes = 3000;

std::string record(std::size_t r, int round) {
  // stream: which record and version; the first 8 bytes say which, so a reader can tell.
  std::string s = bytes(static_cast<std::uint32_t>(r * 1000 + static_cast<std::size_t>(round)), 0, kRecordBytes);
  std::snprintf(s.data(), 9, "%04zu%04d", r, round);
  return s;
}

// Returns "" when the record holds one complete version, else what is wrong.
std::string check_record(std::size_t r, const std::string& got) {
  if (got.size() != kRecordBytes) return "short read";
  int round = -1;
  if (std::sscanf(got.substr(4, 4).c_str(), "%04d", &round) != 1 || round < 0 || round >= kRounds)
    return "no version tag";
  if (got != record(r, round)) return "torn: not one complete version";
  return "";
}

// One writer's work; plain system calls only, so it can run in a forked child as well.
int writer_work(const std::string& shared, const std::string& own, int w) {
  int fd = ::open(shared.c_str(), O_RDWR | O_DIRECT);
  int ofd = ::open(own.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ofd < 0) return 1;
  for (int round = 0; round < kRounds; ++round) {
    for (std::size_t r = static_cast<std::size_t>(w); r < kRecords; r += kWriters)
      if (!pwrite_all(fd, record(r, round), r * kRecordBytes)) return 2;
    // The private file: disjoint appends of a per-writer stream.
    if (!pwrite_all(ofd, bytes(100 + static_cast<std::uint32_t>(w), static_cast<std::uint64_t>(round) * 5000, 5000),
                    static_cast<std::uint64_t>(round) * 5000))
      return 3;
  }
  ::close(ofd);
  ::close(fd);
  return 0;
}

TEST(FaultMount, ConcurrentThreadsAndProcessesMatchASerialModel) {
  MountedVault v(small_chunks());
  const std::string shared = v.path("shared");
  {
    std::string init;
    for (std::size_t r = 0; r < kRecords; ++r) init += record(r, 0);
    write_file(shared, init);
  }
  auto own = [&](int w) { return v.path("own" + std::to_string(w)); };

  // Processes first, before this process has extra threads.
  std::vector<pid_t> children;
  for (int w = kWriters / 2; w < kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) ::_exit(writer_work(shared, own(w), w));
    children.push_back(pid);
  }
  std::atomic<bool> done{false};
  std::atomic<int> writer_failures{0};
  std::vector<std::string> tears;
  std::mutex tears_mu;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters / 2; ++w)
    threads.emplace_back([&, w] {
      if (writer_work(shared, own(w), w) != 0) ++writer_failures;
    });
  for (int rd = 0; rd < 2; ++rd)
    threads.emplace_back([&, rd] {
      int fd = ::open(shared.c_str(), O_RDONLY | O_DIRECT);
      if (fd < 0) return;
      for (std::size_t i = static_cast<std::size_t>(rd); !done.load(); i += 7) {
        const std::size_t r = i % kRecords;
        int err = 0;
        const std::string got = pread_str(fd, r * kRecordBytes, kRecordBytes, &err);
        std::string why = err ? std::string("read failed: ") + std::strerror(err) : check_record(r, got);
        if (!why.empty()) {
          std::lock_guard lk(tears_mu);
          tears.push_back("record " + std::to_string(r) + ": " + why);
        }
      }
      ::close(fd);
    });
  for (pid_t pid : children) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "writer process failed with status " << st;
  }
  for (int i = 0; i < kWriters / 2; ++i) threads[static_cast<std::size_t>(i)].join();
  done = true;
  for (auto& t : threads)
    if (t.joinable()) t.join();
  EXPECT_EQ(writer_failures.load(), 0);
  for (const auto& t : tears) ADD_FAILURE() << t;

  // The serial model: every record holds its owner's last version; each private file its stream.
  v.remount();
  const std::string final_shared = read_file(shared);
  ASSERT_EQ(final_shared.size(), kRecords * kRecordBytes);
  for (std::size_t r = 0; r < kRecords; ++r)
    EXPECT_TRUE(final_shared.substr(r * kRecordBytes, kRecordBytes) == record(r, kRounds - 1)) << "record " << r;
  for (int w = 0; w < kWriters; ++w)
    EXPECT_TRUE(read_file(own(w)) == bytes(100 + static_cast<std::uint32_t>(w), 0, kRounds * 5000)) << "own" << w;
  v.unmount();
  const CommandResult r = fsck(v);
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
}  // namespace gcfs::test
