// The volume container without FUSE: its header slots, sparse creation, growth, and the content
// stream read and written through ContentFile at the container's base offset.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "crypto/key_ring.h"
#include "fs/content_file.h"
#include "fs/volume_container.h"

namespace gcfs {
namespace {

namespace fsys = std::filesystem;

constexpr const char* kPassword = "correct horse";

class VolumeContainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gcfs-volume-container-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/vol.gcv";
  }
  void TearDown() override { fsys::remove_all(dir_); }

  void create(std::uint64_t size, std::uint32_t chunk = 64 * 1024) {
    ScryptParams p;
    p.log_n = 10;  // tests only: fast
    SecretBytes master;
    VaultConfig c = VaultConfig::create(kPassword, chunk, p, VaultKind::Volume, &master);
    c.volume_size = volume_size_for(size, chunk);
    c.rewrap(master, kPassword);
    VolumeContainer::create(path_, c);
  }

  void corrupt_bytes(std::uint64_t off, std::size_t n, std::uint8_t value) {
    int fd = ::open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    std::vector<std::uint8_t> junk(n, value);
    ASSERT_EQ(::pwrite(fd, junk.data(), n, static_cast<off_t>(off)), static_cast<ssize_t>(n));
    ::close(fd);
  }

  std::string dir_, path_;
};

std::vector<std::uint8_t> random_data(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

TEST(VolumeSize, RoundsUpToWholeChunks) {
  EXPECT_EQ(volume_size_for(1, 4096), 4096u);
  EXPECT_EQ(volume_size_for(64 * 1024, 64 * 1024), 64u * 1024);
  EXPECT_EQ(volume_size_for(100000, 64 * 1024), 128u * 1024);
  EXPECT_THROW(volume_size_for(0, 4096), UserError);
}

TEST_F(VolumeContainerTest, CreateIsSparseAndSizedForTheStream) {
  create(1ull << 30);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  const ChunkLayout layout(64 * 1024, kVolumeConfigBlockBytes);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), kVolumeConfigBlockBytes + layout.cipher_size(1ull << 30));
  EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, 256u * 1024) << "a fresh 1 GiB volume must stay sparse";

  VolumeContainer vol(path_, false);
  EXPECT_EQ(vol.config().kind, VaultKind::Volume);
  EXPECT_EQ(vol.config().volume_size, 1ull << 30);
  EXPECT_EQ(vol.config().chunk_size, 64u * 1024);
  EXPECT_NO_THROW(vol.config().unlock(kPassword));
  EXPECT_THROW(vol.config().unlock("wrong"), WrongPassword);
  EXPECT_THROW(VolumeContainer::create(path_, vol.config()), UserError) << "create must never overwrite";
}

TEST_F(VolumeContainerTest, ContentRoundTripsAtTheBaseOffset) {
  create(8 << 20);
  const auto data = random_data(300000, 1);
  {
    VolumeContainer vol(path_, true);
    vol.check_stream_size();
    CpuEngine engine(2);
    KeyRing keys(vol.config().unlock(kPassword));
    ChunkLayout layout = vol.layout();
    ContentFile cf(vol.fd(), layout, engine, keys, path_);
    ASSERT_EQ(cf.plain_size(), 8 << 20);
    ASSERT_EQ(cf.write(123456, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(cf.plain_size(), 8 << 20) << "writes inside a volume never change its size";
  }
  VolumeContainer vol(path_, false);
  CpuEngine engine(1);
  KeyRing keys(vol.config().unlock(kPassword));
  ChunkLayout layout = vol.layout();
  ContentFile cf(vol.fd(), layout, engine, keys, path_);
  std::vector<std::uint8_t> back(data.size() + 1000);
  ASSERT_EQ(cf.read(123456 - 500, back.size(), back.data()), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(std::vector<std::uint8_t>(back.begin(), back.begin() + 500), std::vector<std::uint8_t>(500, 0));
  EXPECT_EQ(std::vector<std::uint8_t>(back.begin() + 500, back.begin() + 500 + data.size()), data);
  // The header slots are untouched by content writes.
  EXPECT_EQ(vol.config().volume_size, 8u << 20);
}

TEST_F(VolumeContainerTest, PunchedChunksBecomeHolesAgain) {
  create(16 << 20);
  VolumeContainer vol(path_, true);
  CpuEngine engine(1);
  KeyRing keys(vol.config().unlock(kPassword));
  ChunkLayout layout = vol.layout();
  ContentFile cf(vol.fd(), layout, engine, keys, path_);
  const auto data = random_data(8 << 20, 2);
  ASSERT_EQ(cf.write(0, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  struct stat full {};
  ASSERT_EQ(::fstat(vol.fd(), &full), 0);
  ASSERT_EQ(cf.punch_hole(0, 8 << 20), 0);
  struct stat punched {};
  ASSERT_EQ(::fstat(vol.fd(), &punched), 0);
  EXPECT_LT(punched.st_blocks * 512, full.st_blocks * 512 - (6 << 20)) << "punching must give the space back";
  std::vector<std::uint8_t> back(1 << 20, 0xff);
  ASSERT_EQ(cf.read(3 << 20, back.size(), back.data()), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(back, std::vector<std::uint8_t>(1 << 20, 0));
}

TEST_F(VolumeContainerTest, GrowKeepsDataAndRefusesShrinkAndWrongPassword) {
  create(4 << 20);
  const auto data = random_data(70000, 3);
  {
    VolumeContainer vol(path_, true);
    CpuEngine engine(1);
    KeyRing keys(vol.config().unlock(kPassword));
    ChunkLayout layout = vol.layout();
    ContentFile cf(vol.fd(), layout, engine, keys, path_);
    ASSERT_EQ(cf.write((4 << 20) - 70000, data.data(), data.size()), 70000);
  }
  {
    VolumeContainer vol(path_, true);
    EXPECT_THROW(vol.grow(2 << 20, kPassword), UserError);
    EXPECT_THROW(vol.grow(8 << 20, "wrong"), WrongPassword);
    EXPECT_EQ(vol.config().volume_size, 4u << 20) << "a failed grow changes nothing";
    vol.grow(8 << 20, kPassword);
    EXPECT_EQ(vol.config().volume_size, 8u << 20);
  }
  VolumeContainer vol(path_, false);
  EXPECT_EQ(vol.config().volume_size, 8u << 20);
  EXPECT_NO_THROW(vol.check_stream_size());
  CpuEngine engine(1);
  KeyRing keys(vol.config().unlock(kPassword));
  ChunkLayout layout = vol.layout();
  ContentFile cf(vol.fd(), layout, engine, keys, path_);
  EXPECT_EQ(cf.plain_size(), 8 << 20);
  std::vector<std::uint8_t> back(70000 + 4096);
  ASSERT_EQ(cf.read((4 << 20) - 70000, back.size(), back.data()), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(std::vector<std::uint8_t>(back.begin(), back.begin() + 70000), data);
  EXPECT_EQ(std::vector<std::uint8_t>(back.begin() + 70000, back.end()), std::vector<std::uint8_t>(4096, 0));
}

TEST_F(VolumeContainerTest, OneDamagedHeaderCopyIsSurvivedBothAreReported) {
  create(1 << 20);
  corrupt_bytes(100, 16, 0x5a);  // inside slot 0's JSON
  {
    VolumeContainer vol(path_, false);
    EXPECT_EQ(vol.config().volume_size, 1u << 20);
  }
  corrupt_bytes(kVolumeSlotBytes + 100, 16, 0x5a);  // and slot 1's
  try {
    VolumeContainer vol(path_, false);
    FAIL() << "a container with both header copies damaged must not open";
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("is corrupt"), std::string::npos) << e.what();
  }
}

TEST_F(VolumeContainerTest, NotAContainerSaysSo) {
  {
    int fd = ::open(path_.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 1 << 20), 0);
    ::close(fd);
  }
  try {
    VolumeContainer vol(path_, false);
    FAIL();
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("not a gpucryptfs volume container"), std::string::npos) << e.what();
  }
}

TEST_F(VolumeContainerTest, WritableOpenIsExclusive) {
  create(1 << 20);
  VolumeContainer first(path_, true);
  try {
    VolumeContainer second(path_, true);
    FAIL() << "two writers on one container";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
}

TEST_F(VolumeContainerTest, InterruptedGrowIsRolledBackAndTruncationIsCorrupt) {
  create(1 << 20);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  const off_t good = st.st_size;
  ASSERT_EQ(::truncate(path_.c_str(), good + (5 << 20)), 0);  // the stream grew, the config did not
  {
    VolumeContainer vol(path_, true);
    vol.check_stream_size();
  }
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, good);
  ASSERT_EQ(::truncate(path_.c_str(), good - 1000), 0);
  VolumeContainer vol(path_, true);
  EXPECT_THROW(vol.check_stream_size(), CorruptData);
}

TEST_F(VolumeContainerTest, DamagedContentHeaderIsCorruptAndAnIntactOneIsAccepted) {
  create(1 << 20);
  {
    VolumeContainer vol(path_, false);
    EXPECT_NO_THROW(vol.check_content_header());
  }
  corrupt_bytes(kVolumeConfigBlockBytes + 1, 1, 'X');  // inside the magic
  VolumeContainer vol(path_, false);
  try {
    vol.check_content_header();
    FAIL() << "a damaged content header was accepted";
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gcfs
