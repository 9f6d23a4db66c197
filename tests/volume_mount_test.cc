// Volume mode end to end through the gpucryptfs binary: create, mount (daemonized), mkfs.ext4,
// loop mount, real files, umount, e2fsck -f, remount and compare; holes after discard; O_DIRECT;
// resize; and the one-line errors for a wrong password and a damaged header.
//
// Needs root, /dev/fuse and loop devices; skips itself otherwise. Every mount, loop device and
// temporary directory is released by an RAII guard, also when an assertion fails half way.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "crypto/vault_config.h"
#include "fs/volume_container.h"
#include "support/mounted_vault.h"

namespace {

namespace fsys = std::filesystem;
using gcfs::test::CommandResult;
using gcfs::test::TempDir;

// test_binary(): GPUCRYPTFS_TEST_BIN when set, so the device run drives its CUDA build.
const std::string kBinary = gcfs::test::test_binary();

CommandResult run(const std::string& cmd) { return gcfs::test::run_shell(cmd); }
std::string q(const std::string& s) { return gcfs::test::shell_quote(s); }

bool is_mounted(const std::string& path) {
  std::ifstream in("/proc/self/mounts");
  std::string dev, mnt, rest;
  while (in >> dev >> mnt && std::getline(in, rest))
    if (mnt == path) return true;
  return false;
}

// Running, not a zombie: a zombie has finished all its work.
bool alive(pid_t pid) {
  const std::string stat = gcfs::test::read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

// The pid in the last "gpucryptfs[PID] info: mounted on DIR" line of a daemon log.
pid_t daemon_pid(const std::string& log, const std::string& dir) {
  std::istringstream in(gcfs::test::read_file(log));
  std::string line;
  pid_t pid = -1;
  const std::string tail = "mounted on " + dir;
  while (std::getline(in, line)) {
    if (line.size() < tail.size() || line.compare(line.size() - tail.size(), tail.size(), tail) != 0) continue;
    const auto b = line.find("gpucryptfs["), e = line.find(']', b);
    if (b != std::string::npos && e != std::string::npos) pid = std::stoi(line.substr(b + 11, e - b - 11));
  }
  return pid;
}

// Something mounted on `dir`, unmounted on scope exit: a FUSE volume (then the guard also waits
// for its daemon to exit, so the container's lock is free and every write is on disk before the
// next mount) or a loop-mounted ext4.
class MountGuard {
 public:
  MountGuard(std::string dir, bool fuse, std::string log = "")
      : dir_(std::move(dir)), fuse_(fuse), pid_(fuse ? daemon_pid(log, dir_) : -1) {}
  MountGuard(const MountGuard&) = delete;
  ~MountGuard() { release(); }
  // Unmounts now; returns whether that worked (a busy mount is lazily detached instead).
  bool release() {
    if (dir_.empty()) return true;
    bool ok = true;
    if (is_mounted(dir_)) {
      const std::string unmount =
          (fuse_ ? gcfs::test::MountedVault::unmount_command(false) : std::string("umount ")) + q(dir_);
      // A loop device detached just before may still hold volume.img for a moment (detaching is
      // deferred while udev or blkid has the device open), so busy is retried for a while.
      CommandResult r = run(unmount);
      for (int i = 0; r.status != 0 && i < 50 && is_mounted(dir_); ++i) {
        ::usleep(100000);
        r = run(unmount);
      }
      ok = r.status == 0;
      if (!ok) {
        why_ = "unmounting " + dir_ + " failed: " + r.output;
        run("umount -l " + q(dir_));
      }
    }
    for (int i = 0; i < 400 && pid_ > 0 && alive(pid_); ++i) ::usleep(25000);
    if (pid_ > 0 && alive(pid_)) {  // stuck: a test must never leave a daemon behind
      ::kill(pid_, SIGKILL);
      why_ += "the daemon " + std::to_string(pid_) + " did not exit within 10 s of the unmount; ";
      ok = false;
    }
    dir_.clear();
    return ok;
  }
  // Why the last release() failed, for the assertion's message.
  const std::string& why() const { return why_; }

 private:
  std::string dir_;
  bool fuse_;
  pid_t pid_;
  std::string why_;
};

// A loop device over a file, detached on scope exit.
class LoopDevice {
 public:
  explicit LoopDevice(const std::string& file) {
    CommandResult r = run("losetup -f --show " + q(file));
    if (r.status == 0) {
      dev_ = r.output;
      while (!dev_.empty() && (dev_.back() == '\n' || dev_.back() == '\r')) dev_.pop_back();
    } else {
      error_ = r.output;
    }
  }
  ~LoopDevice() { release(); }
  void release() {
    if (!dev_.empty()) run("losetup -d " + q(dev_));
    dev_.clear();
  }
  const std::string& dev() const { return dev_; }
  const std::string& error() const { return error_; }

 private:
  std::string dev_, error_;
};

class VolumeMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (loop devices, mount)";
    if (::access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "needs /dev/fuse";
    container_ = tmp_.path() + "/vol.gcv";
    mnt_ = tmp_.path() + "/mnt";
    fs_ = tmp_.path() + "/fs";
    passfile_ = tmp_.path() + "/pass";
    fsys::create_directory(mnt_);
    fsys::create_directory(fs_);
    std::ofstream(passfile_) << "volume test password\n";
  }

  CommandResult create(const std::string& size, const std::string& extra = "") {
    return run(kBinary + " volume create --scrypt-logn 10 --size " + size + " --passfile " + q(passfile_) + " " + extra +
               " " + q(container_));
  }
  // The engine is GPUCRYPTFS_TEST_ENGINE (cpu when unset), as for the directory-mode suites.
  CommandResult mount(const std::string& extra = "") { return mount_unlocked_by("--passfile " + q(passfile_), extra); }
  CommandResult mount_unlocked_by(const std::string& unlock, const std::string& extra = "") {
    return run(kBinary + " volume mount --engine " + gcfs::test::test_engine() + gcfs::test::transport_arg() + " " +
               unlock + " --log " + q(log_path()) + " " + extra + " " + q(container_) + " " + q(mnt_));
  }
  std::string log_path() const { return tmp_.path() + "/daemon.log"; }
  std::string image() const { return mnt_ + "/volume.img"; }
  std::uint64_t container_size() const {
    struct stat st {};
    ::stat(container_.c_str(), &st);
    return static_cast<std::uint64_t>(st.st_size);
  }
  std::vector<std::uint8_t> header_bytes() const {
    std::vector<std::uint8_t> b(gcfs::kVolumeSlots * gcfs::kVolumeSlotBytes);
    std::ifstream in(container_, std::ios::binary);
    in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return b;
  }
  // Writes a slot with a valid checksum (no secret) holding the newest config edited by f: what
  // anyone who can write the container can do. It no longer authenticates.
  void forge_slot(int slot, std::uint64_t generation, const std::function<void(gcfs::VaultConfig&)>& f) {
    const auto header = gcfs::decode_volume_header(header_bytes());
    ASSERT_FALSE(header.copies.empty());
    gcfs::VaultConfig c = header.copies.front().config;
    f(c);
    const auto bytes = gcfs::encode_volume_slot(c, generation);
    std::fstream out(container_, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(slot * gcfs::kVolumeSlotBytes));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::uint64_t container_bytes_on_disk() const {
    struct stat st {};
    ::stat(container_.c_str(), &st);
    return static_cast<std::uint64_t>(st.st_blocks) * 512;
  }

  TempDir tmp_{"gcfs-volume-test"};
  std::string container_, mnt_, fs_, passfile_;
};

std::vector<char> random_bytes(std::size_t n, unsigned seed) {
  std::vector<char> v(n);
  std::mt19937_64 rng(seed);
  for (auto& c : v) c = static_cast<char>(rng());
  return v;
}

// A page-aligned buffer for O_DIRECT.
struct AlignedBuffer {
  explicit AlignedBuffer(std::size_t n) : size(n) {
    void* p = nullptr;
    if (::posix_memalign(&p, 4096, n) == 0) data.reset(static_cast<char*>(p));
  }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data;
  std::size_t size;
};

TEST_F(VolumeMountTest, Ext4OnTheVolumeSurvivesUnmountFsckAndRemount) {
  ASSERT_EQ(create("192M").status, 0);
  std::vector<std::pair<std::string, std::vector<char>>> files;
  {
    CommandResult m = mount();
    ASSERT_EQ(m.status, 0) << m.output;
    MountGuard fuse(mnt_, true, log_path());
    struct stat st {};
    ASSERT_EQ(::stat(image().c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 192 << 20);

    CommandResult mk = run("mkfs.ext4 -q -F " + q(image()));
    ASSERT_EQ(mk.status, 0) << mk.output;
    {
      LoopDevice loop(image());
      ASSERT_FALSE(loop.dev().empty()) << loop.error();
      CommandResult lm = run("mount " + q(loop.dev()) + " " + q(fs_));
      ASSERT_EQ(lm.status, 0) << lm.output;
      MountGuard ext4(fs_, false);
      // Real work: a large file, many small ones in a tree, a rename and a delete.
      files.emplace_back("big.bin", random_bytes(24 << 20, 1));
      for (int i = 0; i < 60; ++i)
        files.emplace_back("tree/d" + std::to_string(i % 7) + "/f" + std::to_string(i), random_bytes(1000 + 777 * i, 100 + i));
      for (const auto& [name, data] : files) {
        fsys::create_directories(fsys::path(fs_ + "/" + name).parent_path());
        std::ofstream(fs_ + "/" + name, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
      }
      std::ofstream(fs_ + "/gone.txt") << "deleted before unmount";
      fsys::rename(fs_ + "/tree/d0", fs_ + "/tree/renamed");
      for (auto& f : files)
        if (f.first.rfind("tree/d0/", 0) == 0) f.first = "tree/renamed/" + f.first.substr(8);
      fsys::remove(fs_ + "/gone.txt");
      // fstrim sends the freed blocks of a deleted file down as discards: loop device, FUSE
      // fallocate(PUNCH_HOLE), and holes in the container again.
      const auto trimmed = random_bytes(20 << 20, 2);
      std::ofstream(fs_ + "/trim_me.bin", std::ios::binary).write(trimmed.data(), static_cast<std::streamsize>(trimmed.size()));
      ASSERT_EQ(run("sync").status, 0);
      const std::uint64_t before = container_bytes_on_disk();
      fsys::remove(fs_ + "/trim_me.bin");
      ASSERT_EQ(run("sync").status, 0);  // ext4 frees the blocks when the journal commits
      CommandResult trim = run("fstrim " + q(fs_));
      ASSERT_EQ(trim.status, 0) << trim.output;
      EXPECT_LT(container_bytes_on_disk() + (16ull << 20), before) << "fstrim must punch the freed chunks";
      ASSERT_TRUE(ext4.release()) << ext4.why();
      loop.release();
    }
    CommandResult fsck = run("e2fsck -f -n " + q(image()));
    EXPECT_EQ(fsck.status, 0) << fsck.output;
    ASSERT_TRUE(fuse.release()) << fuse.why();
  }
  EXPECT_LT(container_bytes_on_disk(), 120ull << 20) << "unwritten parts of the volume stay holes";

  CommandResult m = mount("--read-only");
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  CommandResult fsck = run("e2fsck -f -n " + q(image()));
  EXPECT_EQ(fsck.status, 0) << fsck.output;
  LoopDevice loop(image());
  ASSERT_FALSE(loop.dev().empty()) << loop.error();
  CommandResult lm = run("mount -o ro " + q(loop.dev()) + " " + q(fs_));
  ASSERT_EQ(lm.status, 0) << lm.output;
  MountGuard ext4(fs_, false);
  for (const auto& [name, data] : files) {
    std::ifstream in(fs_ + "/" + name, std::ios::binary);
    ASSERT_TRUE(in) << name;
    std::vector<char> back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(back == data) << name << " differs after remount";
  }
  EXPECT_FALSE(fsys::exists(fs_ + "/gone.txt"));
}

TEST_F(VolumeMountTest, RawBytesSurviveRemountUpToTheLastByte) {
  ASSERT_EQ(create("8M", "--chunk-size 4096").status, 0);
  const std::uint64_t size = 8 << 20;
  // Unaligned and chunk-straddling pieces, the volume's last byte, and the gaps between them.
  const std::vector<std::pair<std::uint64_t, std::size_t>> pieces = {
      {1, 3}, {4095, 2}, {12345, 300000}, {(3 << 20) + 17, 1 << 20}, {size - 5000, 5000}};
  std::vector<char> expect(size, 0);
  {
    CommandResult m = mount();
    ASSERT_EQ(m.status, 0) << m.output;
    MountGuard fuse(mnt_, true, log_path());
    int fd = ::open(image().c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    unsigned seed = 1;
    for (const auto& [off, len] : pieces) {
      auto data = random_bytes(len, seed++);
      ASSERT_EQ(::pwrite(fd, data.data(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len));
      std::copy(data.begin(), data.end(), expect.begin() + static_cast<std::ptrdiff_t>(off));
    }
    // A volume is a fixed-size device: nothing is written at or past its end.
    errno = 0;
    EXPECT_EQ(::pwrite(fd, "x", 1, static_cast<off_t>(size)), -1);
    EXPECT_EQ(errno, ENOSPC);
    EXPECT_EQ(::pwrite(fd, "abcd", 4, static_cast<off_t>(size - 2)), 2) << "a write across the end is cut short";
    expect[size - 2] = 'a';
    expect[size - 1] = 'b';
    EXPECT_NE(::ftruncate(fd, 1 << 20), 0) << "the image's size is fixed while mounted";
    ::close(fd);
    ASSERT_TRUE(fuse.release()) << fuse.why();
  }
  CommandResult m = mount("--read-only");
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  std::ifstream in(image(), std::ios::binary);
  std::vector<char> back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(back.size(), expect.size());
  EXPECT_TRUE(back == expect) << "bytes differ after remount";
  errno = 0;
  EXPECT_EQ(::open(image().c_str(), O_WRONLY), -1) << "a read-only mount refuses writers";
  EXPECT_EQ(errno, EROFS);
}

TEST_F(VolumeMountTest, FreshContainerIsSparse) {
  CommandResult c = create("1G");
  ASSERT_EQ(c.status, 0) << c.output;
  struct stat st {};
  ASSERT_EQ(::stat(container_.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 1ll << 30);
  EXPECT_LT(container_bytes_on_disk(), 1ull << 20) << "a fresh volume must take (almost) no space";
}

TEST_F(VolumeMountTest, DiscardTurnsChunksBackIntoHoles) {
  ASSERT_EQ(create("64M").status, 0);
  CommandResult m = mount();
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  const auto data = random_bytes(16 << 20, 7);
  int fd = ::open(image().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), 8 << 20), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::fsync(fd), 0);
  const std::uint64_t written = container_bytes_on_disk();
  EXPECT_GT(written, 16ull << 20);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8 << 20, 16 << 20), 0) << std::strerror(errno);
  const std::uint64_t punched = container_bytes_on_disk();
  EXPECT_LT(punched + (15ull << 20), written) << "discarded chunks must give their space back";
  std::vector<char> back(1 << 20, 'x');
  ASSERT_EQ(::pread(fd, back.data(), back.size(), 12 << 20), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(back, std::vector<char>(1 << 20, 0));
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 64 << 20) << "discard never changes the volume's size";
  ::close(fd);
}

TEST_F(VolumeMountTest, ODirectReadsAndWritesInParallel) {
  ASSERT_EQ(create("64M").status, 0);
  CommandResult m = mount();
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  int fd = ::open(image().c_str(), O_RDWR | O_DIRECT);
  ASSERT_GE(fd, 0) << "O_DIRECT open: " << std::strerror(errno);
  constexpr int kThreads = 8;
  constexpr std::size_t kBlock = 1 << 20;
  std::vector<std::thread> workers;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      AlignedBuffer out(kBlock), in(kBlock);
      auto data = random_bytes(kBlock, 50 + t);
      std::memcpy(out.data.get(), data.data(), kBlock);
      // Unaligned to chunks (4 KiB past a chunk start), aligned for O_DIRECT.
      const off_t off = static_cast<off_t>(t) * 3 * kBlock + 4096;
      for (int round = 0; round < 4; ++round) {
        if (::pwrite(fd, out.data.get(), kBlock, off) != static_cast<ssize_t>(kBlock)) ++failures[t];
        if (::pread(fd, in.data.get(), kBlock, off) != static_cast<ssize_t>(kBlock)) ++failures[t];
        if (std::memcmp(in.data.get(), out.data.get(), kBlock) != 0) ++failures[t];
      }
    });
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  // One large direct write: the kernel splits it into 1 MiB requests that it sends at once.
  AlignedBuffer big(8 << 20), back(8 << 20);
  auto data = random_bytes(big.size, 99);
  std::memcpy(big.data.get(), data.data(), big.size);
  ASSERT_EQ(::pwrite(fd, big.data.get(), big.size, 32 << 20), static_cast<ssize_t>(big.size));
  ASSERT_EQ(::pread(fd, back.data.get(), back.size, 32 << 20), static_cast<ssize_t>(back.size));
  EXPECT_EQ(std::memcmp(big.data.get(), back.data.get(), big.size), 0);
  ::close(fd);

  // The daemon logs how many requests it served at once: more than one, or the gpu engine
  // would never see a batch larger than a single request.
  ASSERT_TRUE(fuse.release()) << fuse.why();
  std::string text;
  for (int i = 0; i < 250 && text.find("at most ") == std::string::npos; ++i) {  // the daemon logs it as it exits
    if (i) ::usleep(20000);
    std::ifstream log(tmp_.path() + "/daemon.log");
    text.assign((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  }
  const auto at = text.find("at most ");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GE(std::stoi(text.substr(at + 8)), 2) << "requests were served one at a time:\n" << text;
}

// Like a disk, the volume ends at its size: a write across the end is short (buffered) or
// refused with ENOSPC (O_DIRECT), never EIO, which the kernel made of a short direct write.
TEST_F(VolumeMountTest, WritesAcrossTheEndAreShortOrEnospcNeverEio) {
  ASSERT_EQ(create("16M").status, 0);
  CommandResult m = mount();
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  const off_t size = 16 << 20;
  AlignedBuffer buf(8192);
  std::memset(buf.data.get(), 'x', buf.size);
  int fd = ::open(image().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::pwrite(fd, buf.data.get(), 8192, size - 4096), 4096) << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(::pwrite(fd, buf.data.get(), 8192, size), -1);
  EXPECT_EQ(errno, ENOSPC);
  ::close(fd);
  fd = ::open(image().c_str(), O_RDWR | O_DIRECT);
  ASSERT_GE(fd, 0);
  errno = 0;
  EXPECT_EQ(::pwrite(fd, buf.data.get(), 8192, size - 4096), -1);
  EXPECT_EQ(errno, ENOSPC) << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(::pwrite(fd, buf.data.get(), 4096, size), -1);
  EXPECT_EQ(errno, ENOSPC) << std::strerror(errno);
  EXPECT_EQ(::pwrite(fd, buf.data.get(), 4096, size - 4096), 4096) << "the last block itself is writable";
  ::close(fd);
}

TEST_F(VolumeMountTest, ResizeGrowsAndRefusesToShrink) {
  ASSERT_EQ(create("32M").status, 0);
  CommandResult grow = run(kBinary + " volume resize --size 96M --passfile " + q(passfile_) + " " + q(container_));
  ASSERT_EQ(grow.status, 0) << grow.output;
  CommandResult shrink = run(kBinary + " volume resize --size 16M --passfile " + q(passfile_) + " " + q(container_));
  EXPECT_NE(shrink.status, 0);
  EXPECT_NE(shrink.output.find("cannot shrink"), std::string::npos) << shrink.output;
  CommandResult m = mount();
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  struct stat st {};
  ASSERT_EQ(::stat(image().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 96 << 20);
  CommandResult busy = run(kBinary + " volume resize --size 128M --passfile " + q(passfile_) + " " + q(container_));
  EXPECT_NE(busy.status, 0) << "resizing a mounted volume must be refused";
  EXPECT_NE(busy.output.find("in use"), std::string::npos) << busy.output;
}

TEST_F(VolumeMountTest, WrongPasswordIsAOneLineErrorWithItsExitCode) {
  ASSERT_EQ(create("16M").status, 0);
  std::ofstream(passfile_) << "not the password\n";
  CommandResult m = mount();
  EXPECT_EQ(m.status, 12) << m.output;
  EXPECT_NE(m.output.find("wrong password"), std::string::npos) << m.output;
  EXPECT_EQ(std::count(m.output.begin(), m.output.end(), '\n'), 1) << m.output;
  EXPECT_FALSE(is_mounted(mnt_));
}

TEST_F(VolumeMountTest, DamagedHeaderIsAOneLineErrorWithItsExitCode) {
  ASSERT_EQ(create("16M").status, 0);
  {
    // Garbage over both header copies, as a stray dd would leave.
    std::fstream f(container_, std::ios::in | std::ios::out | std::ios::binary);
    for (int slot = 0; slot < 2; ++slot) {
      f.seekp(slot * 4096 + 40);
      f.write("garbage garbage garbage", 23);
    }
  }
  CommandResult m = mount();
  EXPECT_EQ(m.status, 23) << m.output;
  EXPECT_NE(m.output.find("corrupt"), std::string::npos) << m.output;
  EXPECT_EQ(std::count(m.output.begin(), m.output.end(), '\n'), 1) << m.output;
  EXPECT_FALSE(is_mounted(mnt_));

  std::ofstream(container_, std::ios::binary | std::ios::trunc) << std::string(1 << 16, '\0');
  CommandResult z = mount();
  EXPECT_EQ(z.status, 23) << z.output;
  EXPECT_NE(z.output.find("not a gpucryptfs volume container"), std::string::npos) << z.output;
}

// A script that unmounts and mounts again at once: the old daemon may still be exiting, holding
// the container's lock for a moment; the new mount waits for it instead of failing "in use".
TEST_F(VolumeMountTest, MountRightAfterUnmountWaitsForTheOldDaemon) {
  ASSERT_EQ(create("16M").status, 0);
  ASSERT_EQ(mount().status, 0);
  const std::string unmount = gcfs::test::MountedVault::unmount_command(false) + q(mnt_);
  for (int i = 0; i < 3; ++i) {
    CommandResult r = run(unmount + " && " + kBinary + " volume mount --engine " + gcfs::test::test_engine() + gcfs::test::transport_arg() +
                          " --passfile " + q(passfile_) + " --log " + q(log_path()) + " " + q(container_) + " " + q(mnt_));
    ASSERT_EQ(r.status, 0) << "round " << i << ": " << r.output;
  }
  MountGuard fuse(mnt_, true, log_path());
  struct stat st {};
  EXPECT_EQ(::stat(image().c_str(), &st), 0);
}

// One damaged header copy: the volume mounts from the other, and the user at the terminal is told,
// not only the log.
TEST_F(VolumeMountTest, OneDamagedHeaderCopyMountsAndSaysSoOnTheTerminal) {
  ASSERT_EQ(create("16M").status, 0);
  {
    std::fstream f(container_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.write("garbage garbage garbage", 23);
  }
  CommandResult m = mount();
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  EXPECT_NE(m.output.find("one copy of the volume header is damaged"), std::string::npos) << m.output;
  EXPECT_NE(gcfs::test::read_file(log_path()).find("one copy of the volume header is damaged"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(image().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 16 << 20);
}

// The content stream's own header (magic, version, file ID) sits behind the config slots at 64 KiB.
// A flipped byte there used to mount fine and then fail every read with EIO.
TEST_F(VolumeMountTest, DamagedContentHeaderIsRefusedAtMountNotByEveryRead) {
  ASSERT_EQ(create("16M").status, 0);
  {
    std::fstream f(container_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(65536 + 5);  // the version field
    f.put('\xff');
  }
  CommandResult m = mount();
  EXPECT_EQ(m.status, 23) << m.output;
  EXPECT_NE(m.output.find("corrupt"), std::string::npos) << m.output;
  EXPECT_EQ(std::count(m.output.begin(), m.output.end(), '\n'), 1) << m.output;
  EXPECT_FALSE(is_mounted(mnt_));
  if (is_mounted(mnt_)) run("fusermount3 -u " + q(mnt_));
}

// docs/USAGE.md: an invalid option value is a usage error, exit 2, and nothing is created.
TEST_F(VolumeMountTest, BadOptionValuesAreUsageErrors) {
  for (const std::string bad : {"--size abc", "--size 0", "--size 1.5G", "--size 16M --chunk-size 36K",
                                "--size 16M --scrypt-logn 5"}) {
    CommandResult c = run(kBinary + " volume create --passfile " + q(passfile_) + " " + bad + " " + q(container_));
    EXPECT_EQ(c.status, 2) << bad << ": " << c.output;
    EXPECT_EQ(std::count(c.output.begin(), c.output.end(), '\n'), 1) << c.output;
    EXPECT_FALSE(fsys::exists(container_)) << bad;
  }
  ASSERT_EQ(create("16M").status, 0);
  CommandResult r = run(kBinary + " volume resize --size 2X --passfile " + q(passfile_) + " " + q(container_));
  EXPECT_EQ(r.status, 2) << r.output;
  CommandResult m = mount("--threads 0");
  EXPECT_EQ(m.status, 2) << m.output;
  EXPECT_FALSE(is_mounted(mnt_));
}

TEST_F(VolumeMountTest, NonEmptyMountpointIsRefused) {
  ASSERT_EQ(create("16M").status, 0);
  std::ofstream(mnt_ + "/something") << "x";
  CommandResult m = mount();
  EXPECT_EQ(m.status, 10) << m.output;
  EXPECT_FALSE(is_mounted(mnt_));
}

// Issue 18, finding 6: a forged newer header slot (valid checksum, smaller size) made the mount
// cut the container to that size, then say "wrong password". Now nothing is cut before a slot
// authenticates, and the valid older copy is used, with a line on the terminal saying so.
TEST_F(VolumeMountTest, ForgedNewerSlotNeverCutsTheContainerAndTheOlderCopyMounts) {
  ASSERT_EQ(create("16M").status, 0);
  forge_slot(1, 5, [](gcfs::VaultConfig& c) { c.volume_size = 4 << 20; });
  const std::uint64_t size = container_size();
  const auto header = header_bytes();
  const std::string good_password = gcfs::test::read_file(passfile_);
  std::ofstream(passfile_) << "not the password\n";
  CommandResult wrong = mount();
  EXPECT_EQ(wrong.status, 12) << wrong.output;
  EXPECT_FALSE(is_mounted(mnt_));
  EXPECT_EQ(container_size(), size) << "a failed mount must leave the container as it was";
  EXPECT_EQ(header_bytes(), header);

  std::ofstream(passfile_) << good_password;
  CommandResult m = mount();
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  EXPECT_NE(m.output.find("newest copy of the volume header was not used"), std::string::npos) << m.output;
  EXPECT_NE(m.output.find("copy 1 (generation 5) does not open"), std::string::npos) << m.output;
  struct stat st {};
  ASSERT_EQ(::stat(image().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 16 << 20);
  EXPECT_EQ(container_size(), size);
}

// resize after a forged newer slot: the size is judged by the copy that authenticates, not by
// the forged one, and the grow writes over the forged slot.
TEST_F(VolumeMountTest, ResizeJudgesByTheAuthenticatedCopyAndReplacesTheForgedOne) {
  ASSERT_EQ(create("16M").status, 0);
  forge_slot(1, 9, [](gcfs::VaultConfig& c) { c.volume_size = 64 << 20; });
  CommandResult grow = run(kBinary + " volume resize --size 32M --passfile " + q(passfile_) + " " + q(container_));
  ASSERT_EQ(grow.status, 0) << grow.output;
  EXPECT_NE(grow.output.find("copy 1 (generation 9) does not open"), std::string::npos) << grow.output;
  EXPECT_NE(grow.output.find("from 16 MiB to 32 MiB"), std::string::npos) << grow.output;
  const auto header = gcfs::decode_volume_header(header_bytes());
  ASSERT_EQ(header.copies.size(), 2u);
  EXPECT_EQ(header.copies.front().slot, 1);
  EXPECT_EQ(header.copies.front().generation, 2u);
  CommandResult m = mount();
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  EXPECT_EQ(m.output.find("was not used"), std::string::npos) << m.output;
  struct stat st {};
  ASSERT_EQ(::stat(image().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 32 << 20);
}

// A scrypt cost above what 'volume create' makes is refused before the password is asked for,
// naming the cost; the option lets mount and resize through.
TEST_F(VolumeMountTest, ExpensiveKdfIsRefusedAtOnceAndOpensWithTheOption) {
  gcfs::SecretBytes master;
  const std::string password = "volume test password";
  gcfs::VaultConfig c = gcfs::VaultConfig::create(password, 65536, gcfs::ScryptParams{10, 8, 2}, gcfs::VaultKind::Volume, &master);
  c.volume_size = 16 << 20;
  c.seal(master);
  gcfs::VolumeContainer::create(container_, c);
  for (const std::string& cmd : {kBinary + " volume mount --passfile " + q(passfile_) + " " + q(container_) + " " + q(mnt_),
                                 kBinary + " volume resize --size 32M --passfile " + q(passfile_) + " " + q(container_)}) {
    const auto t0 = std::chrono::steady_clock::now();
    CommandResult r = run("timeout 60 " + cmd + " </dev/null");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << cmd;
    EXPECT_EQ(r.status, 23) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("scrypt N=2^10, r=8, p=2"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--allow-expensive-kdf"), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(is_mounted(mnt_));
    if (is_mounted(mnt_)) MountGuard(mnt_, true).release();  // a test never leaves a mount behind
  }
  CommandResult grow = run(kBinary + " volume resize --allow-expensive-kdf --size 32M --passfile " + q(passfile_) + " " +
                           q(container_));
  ASSERT_EQ(grow.status, 0) << grow.output;
  CommandResult m = mount("--allow-expensive-kdf");
  ASSERT_EQ(m.status, 0) << m.output;
  MountGuard fuse(mnt_, true, log_path());
  struct stat st {};
  ASSERT_EQ(::stat(image().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 32 << 20);
}

// The container is a file the user names: a FIFO or a directory there is refused at once by
// mount and resize, never opened in a way that could block.
TEST_F(VolumeMountTest, FifoOrDirectoryAsContainerIsRefusedAtOnce) {
  ASSERT_EQ(::mkfifo(container_.c_str(), 0600), 0);
  for (int round = 0; round < 2; ++round) {
    const char* word = round == 0 ? "FIFO" : "directory";
    for (const std::string& cmd : {kBinary + " volume mount --passfile " + q(passfile_) + " " + q(container_) + " " + q(mnt_),
                                   kBinary + " volume resize --size 32M --passfile " + q(passfile_) + " " + q(container_)}) {
      const auto t0 = std::chrono::steady_clock::now();
      CommandResult r = run("timeout 20 " + cmd + " </dev/null");
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << cmd;
      EXPECT_EQ(r.status, 6) << cmd << "\n" << r.output;  // a CONTAINER of the wrong type: README's table
      EXPECT_NE(r.output.find(word), std::string::npos) << r.output;
      EXPECT_FALSE(is_mounted(mnt_));
      if (is_mounted(mnt_)) MountGuard(mnt_, true).release();
    }
    fsys::remove(container_);
    fsys::create_directory(container_);
  }
}

// volume rekey end to end: three ways in (two passwords, a key file), ext4 inside, the re-key
// killed with SIGKILL at seeded moments and run again each time; afterwards every file reads
// back, e2fsck -fn is clean, each kept slot opens, and the header from before opens nothing.
TEST_F(VolumeMountTest, Ext4SurvivesARekeyKilledAtRandomMomentsAndRunAgain) {
  ASSERT_EQ(create("128M").status, 0);
  const std::string pass2 = tmp_.path() + "/pass2", keyfile = tmp_.path() + "/key";
  std::ofstream(pass2) << "second password\n";
  {
    const auto key = random_bytes(4096, 7);
    std::ofstream(keyfile, std::ios::binary).write(key.data(), static_cast<std::streamsize>(key.size()));
  }
  ::chmod(pass2.c_str(), 0600), ::chmod(keyfile.c_str(), 0600), ::chmod(passfile_.c_str(), 0600);
  ASSERT_EQ(run(kBinary + " volume keyslot add --passfile " + q(passfile_) + " --new-passfile " + q(pass2) + " " +
                q(container_)).status, 0);
  ASSERT_EQ(run(kBinary + " volume keyslot add --passfile " + q(passfile_) + " --new-keyfile " + q(keyfile) + " " +
                q(container_)).status, 0);
  std::vector<std::pair<std::string, std::vector<char>>> files;
  files.emplace_back("big.bin", random_bytes(40 << 20, 11));
  for (int i = 0; i < 40; ++i) files.emplace_back("d" + std::to_string(i % 5) + "/f" + std::to_string(i), random_bytes(100 + 901 * i, 20 + i));
  auto with_ext4 = [&](const std::string& unlock, bool write) {
    CommandResult m = mount_unlocked_by(unlock);
    ASSERT_EQ(m.status, 0) << m.output;
    MountGuard fuse(mnt_, true, log_path());
    if (write) {
      ASSERT_EQ(run("mkfs.ext4 -q -F " + q(image())).status, 0);
    }
    CommandResult fsck = run("e2fsck -f -n " + q(image()));
    EXPECT_EQ(fsck.status, 0) << fsck.output;
    LoopDevice loop(image());
    ASSERT_FALSE(loop.dev().empty()) << loop.error();
    ASSERT_EQ(run("mount " + std::string(write ? "" : "-o ro ") + q(loop.dev()) + " " + q(fs_)).status, 0);
    MountGuard ext4(fs_, false);
    for (const auto& [name, data] : files) {
      const std::string path = fs_ + "/" + name;
      if (write) {
        fsys::create_directories(fsys::path(path).parent_path());
        std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
        continue;
      }
      std::ifstream in(path, std::ios::binary);
      std::vector<char> back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_TRUE(back == data) << name << " differs after the re-key";
    }
    ASSERT_TRUE(ext4.release()) << ext4.why();
    loop.release();
    ASSERT_TRUE(fuse.release()) << fuse.why();
  };
  const std::string first = "--passfile " + q(passfile_);
  with_ext4(first, true);
  const std::string old_header = tmp_.path() + "/old-header";
  ASSERT_EQ(run("dd if=" + q(container_) + " of=" + q(old_header) + " bs=64k count=1 status=none").status, 0);
  const std::string rekey = kBinary + " volume rekey -q --engine " + gcfs::test::test_engine() + " --passfile " +
                            q(passfile_) + " --slot-passfile 1=" + q(pass2) + " --slot-keyfile 2=" + q(keyfile) + " " +
                            q(container_);
  // Three re-keys, each killed: two from inside after a seeded number of segments (at a known point,
  // whatever the machine's speed), one from outside at a seeded moment; each then run again.
  std::mt19937 rng(2026);
  for (int round = 0; round < 3; ++round) {
    if (round < 2) {
      const int segments = 1 + static_cast<int>(rng() % 6);
      SCOPED_TRACE("killed after " + std::to_string(segments) + " segments");
      CommandResult killed = run("GPUCRYPTFS_TEST_REKEY_KILL_AFTER=" + std::to_string(segments) + " " + rekey);
      EXPECT_NE(killed.status, 0) << killed.output;
      CommandResult refused = mount();
      EXPECT_NE(refused.status, 0);
      EXPECT_NE(refused.output.find("volume rekey"), std::string::npos) << refused.output;
      if (refused.status == 0) MountGuard(mnt_, true).release();
    } else {
      const int ms = 15 + static_cast<int>(rng() % 150);
      SCOPED_TRACE("killed after " + std::to_string(ms) + " ms");
      run(rekey + " & pid=$!; sleep " + std::to_string(ms / 1000.0) + "; kill -9 $pid; wait $pid");
    }
    CommandResult again = run(rekey);
    ASSERT_EQ(again.status, 0) << again.output;
  }
  with_ext4(first, false);
  with_ext4("--passfile " + q(pass2), false);
  with_ext4("--keyfile " + q(keyfile), false);
  ASSERT_EQ(run("dd if=" + q(old_header) + " of=" + q(container_) + " bs=64k count=1 conv=notrunc status=none").status, 0);
  CommandResult old = mount();
  EXPECT_EQ(old.status, 23) << "the header from before the re-key must open nothing\n" << old.output;
  if (old.status == 0) MountGuard(mnt_, true).release();
}

}  // namespace
