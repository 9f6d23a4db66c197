// Volume mode end to end through the gpucryptfs binary: create, mount (daemonized), mkfs.ext4,
// loop mount, real files, umount, e2fsck -f, remount and compare; holes after discard; O_DIRECT;
// resize; and the one-line errors for a wrong password and a damaged header.
//
// Needs root, /dev/fuse and loop devices; skips itself otherwise. Every mount, loop device and
// temporary directory is released by an RAII guard, also when an assertion fails half way.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fsys = std::filesystem;

const std::string kBinary = GPUCRYPTFS_BIN;

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr together
};

Result run(const std::string& cmd) {
  Result r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string q(const std::string& s) { return "'" + s + "'"; }

bool is_mounted(const std::string& path) {
  std::ifstream in("/proc/self/mounts");
  std::string dev, mnt, rest;
  while (in >> dev >> mnt && std::getline(in, rest))
    if (mnt == path) return true;
  return false;
}

// A directory that is removed, with everything in it, when the test ends.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gcfs-volume-test-XXXXXX";
    if (::mkdtemp(tmpl)) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fsys::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Something mounted on `dir` (a FUSE volume or a loop-mounted ext4), unmounted on scope exit.
class MountGuard {
 public:
  MountGuard(std::string dir, bool fuse) : dir_(std::move(dir)), fuse_(fuse) {}
  MountGuard(const MountGuard&) = delete;
  ~MountGuard() { release(); }
  // Unmounts now; returns whether that worked (a busy mount is lazily detached instead).
  bool release() {
    if (dir_.empty() || !is_mounted(dir_)) return true;
    bool ok = run((fuse_ ? "fusermount3 -u " : "umount ") + q(dir_)).code == 0;
    if (!ok) run((fuse_ ? "fusermount3 -u -z " : "umount -l ") + q(dir_));
    // The daemon finishes its last writes after the kernel lets go of the mount.
    for (int i = 0; i < 100 && is_mounted(dir_); ++i) ::usleep(20000);
    dir_.clear();
    return ok;
  }

 private:
  std::string dir_;
  bool fuse_;
};

// A loop device over a file, detached on scope exit.
class LoopDevice {
 public:
  explicit LoopDevice(const std::string& file) {
    Result r = run("losetup -f --show " + q(file));
    if (r.code == 0) {
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
    ASSERT_FALSE(tmp_.path().empty());
    container_ = tmp_.path() + "/vol.gcv";
    mnt_ = tmp_.path() + "/mnt";
    fs_ = tmp_.path() + "/fs";
    passfile_ = tmp_.path() + "/pass";
    fsys::create_directory(mnt_);
    fsys::create_directory(fs_);
    std::ofstream(passfile_) << "volume test password\n";
  }

  Result create(const std::string& size, const std::string& extra = "") {
    return run(kBinary + " volume create --scrypt-logn 10 --size " + size + " --passfile " + q(passfile_) + " " + extra +
               " " + q(container_));
  }
  Result mount(const std::string& extra = "") {
    return run(kBinary + " volume mount --engine cpu --passfile " + q(passfile_) + " --log " +
               q(tmp_.path() + "/daemon.log") + " " + extra + " " + q(container_) + " " + q(mnt_));
  }
  std::string image() const { return mnt_ + "/volume.img"; }
  std::uint64_t container_bytes_on_disk() const {
    struct stat st {};
    ::stat(container_.c_str(), &st);
    return static_cast<std::uint64_t>(st.st_blocks) * 512;
  }

  TempDir tmp_;
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
  ASSERT_EQ(create("192M").code, 0);
  std::vector<std::pair<std::string, std::vector<char>>> files;
  {
    Result m = mount();
    ASSERT_EQ(m.code, 0) << m.output;
    MountGuard fuse(mnt_, true);
    struct stat st {};
    ASSERT_EQ(::stat(image().c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 192 << 20);

    Result mk = run("mkfs.ext4 -q -F " + q(image()));
    ASSERT_EQ(mk.code, 0) << mk.output;
    {
      LoopDevice loop(image());
      ASSERT_FALSE(loop.dev().empty()) << loop.error();
      Result lm = run("mount " + q(loop.dev()) + " " + q(fs_));
      ASSERT_EQ(lm.code, 0) << lm.output;
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
      ASSERT_TRUE(ext4.release());
      loop.release();
    }
    Result fsck = run("e2fsck -f -n " + q(image()));
    EXPECT_EQ(fsck.code, 0) << fsck.output;
    ASSERT_TRUE(fuse.release());
  }
  EXPECT_LT(container_bytes_on_disk(), 120ull << 20) << "unwritten parts of the volume stay holes";

  Result m = mount("--read-only");
  ASSERT_EQ(m.code, 0) << m.output;
  MountGuard fuse(mnt_, true);
  Result fsck = run("e2fsck -f -n " + q(image()));
  EXPECT_EQ(fsck.code, 0) << fsck.output;
  LoopDevice loop(image());
  ASSERT_FALSE(loop.dev().empty()) << loop.error();
  Result lm = run("mount -o ro " + q(loop.dev()) + " " + q(fs_));
  ASSERT_EQ(lm.code, 0) << lm.output;
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
  ASSERT_EQ(create("8M", "--chunk-size 4096").code, 0);
  const std::uint64_t size = 8 << 20;
  // Unaligned and chunk-straddling pieces, the volume's last byte, and the gaps between them.
  const std::vector<std::pair<std::uint64_t, std::size_t>> pieces = {
      {1, 3}, {4095, 2}, {12345, 300000}, {(3 << 20) + 17, 1 << 20}, {size - 5000, 5000}};
  std::vector<char> expect(size, 0);
  {
    Result m = mount();
    ASSERT_EQ(m.code, 0) << m.output;
    MountGuard fuse(mnt_, true);
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
    ASSERT_TRUE(fuse.release());
  }
  Result m = mount("--read-only");
  ASSERT_EQ(m.code, 0) << m.output;
  MountGuard fuse(mnt_, true);
  std::ifstream in(image(), std::ios::binary);
  std::vector<char> back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(back.size(), expect.size());
  EXPECT_TRUE(back == expect) << "bytes differ after remount";
  errno = 0;
  EXPECT_EQ(::open(image().c_str(), O_WRONLY), -1) << "a read-only mount refuses writers";
  EXPECT_EQ(errno, EROFS);
}

TEST_F(VolumeMountTest, FreshContainerIsSparse) {
  Result c = create("1G");
  ASSERT_EQ(c.code, 0) << c.output;
  struct stat st {};
  ASSERT_EQ(::stat(container_.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 1ll << 30);
  EXPECT_LT(container_bytes_on_disk(), 1ull << 20) << "a fresh volume must take (almost) no space";
}

TEST_F(VolumeMountTest, DiscardTurnsChunksBackIntoHoles) {
  ASSERT_EQ(create("64M").code, 0);
  Result m = mount();
  ASSERT_EQ(m.code, 0) << m.output;
  MountGuard fuse(mnt_, true);
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
  ASSERT_EQ(create("64M").code, 0);
  Result m = mount();
  ASSERT_EQ(m.code, 0) << m.output;
  MountGuard fuse(mnt_, true);
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
  ASSERT_TRUE(fuse.release());
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

TEST_F(VolumeMountTest, ResizeGrowsAndRefusesToShrink) {
  ASSERT_EQ(create("32M").code, 0);
  Result grow = run(kBinary + " volume resize --size 96M --passfile " + q(passfile_) + " " + q(container_));
  ASSERT_EQ(grow.code, 0) << grow.output;
  Result shrink = run(kBinary + " volume resize --size 16M --passfile " + q(passfile_) + " " + q(container_));
  EXPECT_NE(shrink.code, 0);
  EXPECT_NE(shrink.output.find("cannot shrink"), std::string::npos) << shrink.output;
  Result m = mount();
  ASSERT_EQ(m.code, 0) << m.output;
  MountGuard fuse(mnt_, true);
  struct stat st {};
  ASSERT_EQ(::stat(image().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 96 << 20);
  Result busy = run(kBinary + " volume resize --size 128M --passfile " + q(passfile_) + " " + q(container_));
  EXPECT_NE(busy.code, 0) << "resizing a mounted volume must be refused";
  EXPECT_NE(busy.output.find("in use"), std::string::npos) << busy.output;
}

TEST_F(VolumeMountTest, WrongPasswordIsAOneLineErrorWithItsExitCode) {
  ASSERT_EQ(create("16M").code, 0);
  std::ofstream(passfile_) << "not the password\n";
  Result m = mount();
  EXPECT_EQ(m.code, 12) << m.output;
  EXPECT_NE(m.output.find("wrong password"), std::string::npos) << m.output;
  EXPECT_EQ(std::count(m.output.begin(), m.output.end(), '\n'), 1) << m.output;
  EXPECT_FALSE(is_mounted(mnt_));
}

TEST_F(VolumeMountTest, DamagedHeaderIsAOneLineErrorWithItsExitCode) {
  ASSERT_EQ(create("16M").code, 0);
  {
    // Garbage over both header copies, as a stray dd would leave.
    std::fstream f(container_, std::ios::in | std::ios::out | std::ios::binary);
    for (int slot = 0; slot < 2; ++slot) {
      f.seekp(slot * 4096 + 40);
      f.write("garbage garbage garbage", 23);
    }
  }
  Result m = mount();
  EXPECT_EQ(m.code, 23) << m.output;
  EXPECT_NE(m.output.find("corrupt"), std::string::npos) << m.output;
  EXPECT_EQ(std::count(m.output.begin(), m.output.end(), '\n'), 1) << m.output;
  EXPECT_FALSE(is_mounted(mnt_));

  std::ofstream(container_, std::ios::binary | std::ios::trunc) << std::string(1 << 16, '\0');
  Result z = mount();
  EXPECT_EQ(z.code, 23) << z.output;
  EXPECT_NE(z.output.find("not a gpucryptfs volume container"), std::string::npos) << z.output;
}

TEST_F(VolumeMountTest, NonEmptyMountpointIsRefused) {
  ASSERT_EQ(create("16M").code, 0);
  std::ofstream(mnt_ + "/something") << "x";
  Result m = mount();
  EXPECT_EQ(m.code, 10) << m.output;
  EXPECT_FALSE(is_mounted(mnt_));
}

}  // namespace
