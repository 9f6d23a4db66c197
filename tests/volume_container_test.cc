// The volume container without FUSE: its header slots, sparse creation, growth, and the content
// stream read and written through ContentFile at the container's base offset.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <random>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "crypto/key_ring.h"
#include "fs/content/content_file.h"
#include "fs/volume_container.h"
#include "support/version1_config.h"

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
    c.seal(master);  // the size is authenticated by the digest
    VolumeContainer::create(path_, c);
  }

  // Writes a slot with a valid checksum holding `config` at `generation`: what anyone who can
  // write the container can do, since the checksum is no secret.
  void forge_slot(int slot, std::uint64_t generation, const VaultConfig& config) {
    const auto bytes = encode_volume_slot(config, generation);
    int fd = ::open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(slot * kVolumeSlotBytes)),
              static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }
  // The config as created, edited by f: still parses, no longer authenticates.
  VaultConfig edited_config(const std::function<void(VaultConfig&)>& f) {
    VolumeContainer vol(path_, false);
    VaultConfig c = vol.config();
    f(c);
    return c;
  }
  std::uint64_t file_size() const {
    struct stat st {};
    return ::stat(path_.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  }
  std::vector<std::uint8_t> header_bytes() const {
    std::vector<std::uint8_t> b(kVolumeSlots * kVolumeSlotBytes);
    int fd = ::open(path_.c_str(), O_RDONLY);
    if (fd >= 0) {
      if (::pread(fd, b.data(), b.size(), 0) != static_cast<ssize_t>(b.size())) b.clear();
      ::close(fd);
    }
    return b;
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
    KeyRing keys(vol.unlock(kPassword));
    vol.check_stream_size();
    CpuEngine engine(2);
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
  KeyRing keys(vol.unlock(kPassword));
  EXPECT_NO_THROW(vol.check_stream_size());
  CpuEngine engine(1);
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
    EXPECT_THROW(vol.check_stream_size(), std::logic_error) << "nothing is cut before the header is authenticated";
    vol.unlock(kPassword);
    vol.check_stream_size();
  }
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, good);
  ASSERT_EQ(::truncate(path_.c_str(), good - 1000), 0);
  VolumeContainer vol(path_, true);
  vol.unlock(kPassword);
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

// Issue 18, finding 6: a forged newer slot (valid checksum, smaller volume_size) made a mount
// cut the container to its size and only then say "wrong password".
TEST_F(VolumeContainerTest, ForgedNewerSlotIsAuthenticatedBeforeAnythingIsCut) {
  create(4 << 20);
  forge_slot(1, 2, edited_config([](VaultConfig& c) { c.volume_size = 1 << 20; }));
  const std::uint64_t size = file_size();
  const auto header = header_bytes();
  {
    VolumeContainer vol(path_, true);
    EXPECT_EQ(vol.config().volume_size, 1u << 20) << "before unlock, config() is the newest copy as read";
    EXPECT_THROW(vol.check_stream_size(), std::logic_error);
    EXPECT_THROW(vol.unlock("wrong"), WrongPassword);
    EXPECT_THROW(vol.grow(8 << 20, "wrong"), WrongPassword);
  }
  EXPECT_EQ(file_size(), size) << "a failed unlock must leave the container as it was";
  EXPECT_EQ(header_bytes(), header);
}

// A newest copy that does not authenticate is passed over for the older one, and the log says so.
TEST_F(VolumeContainerTest, ForgedNewerSlotFallsBackToTheOlderCopyAndSaysSo) {
  create(4 << 20);
  forge_slot(1, 7, edited_config([](VaultConfig& c) { c.volume_size = 1 << 20; }));
  const std::uint64_t size = file_size();
  VolumeContainer vol(path_, true);
  ::testing::internal::CaptureStderr();
  KeyRing keys(vol.unlock(kPassword));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(vol.config().volume_size, 4u << 20);
  EXPECT_NE(log.find("newest copy of the volume header was not used"), std::string::npos) << log;
  EXPECT_NE(log.find("copy 1 (generation 7) does not open"), std::string::npos) << log;
  EXPECT_NE(log.find("using the older copy 0"), std::string::npos) << log;
  vol.check_stream_size();
  vol.check_content_header();
  EXPECT_EQ(file_size(), size);
  // The data is there, under the older copy's key and size.
  CpuEngine engine(1);
  const ChunkLayout layout = vol.layout();  // a value: ContentFile keeps a reference to it
  ContentFile cf(vol.fd(), layout, engine, keys, path_);
  EXPECT_EQ(cf.plain_size(), 4 << 20);
}

// Falling back, a longer stream may belong to the larger volume the unusable copy described (a
// grow whose new slot was damaged later): it is left alone, not cut back as an interrupted grow.
TEST_F(VolumeContainerTest, AfterAFallbackALongerStreamIsLeftAlone) {
  create(1 << 20);
  const std::uint64_t good = file_size();
  ASSERT_EQ(::truncate(path_.c_str(), static_cast<off_t>(good + (5 << 20))), 0);
  forge_slot(1, 2, edited_config([](VaultConfig& c) { c.volume_size = 6 << 20; }));
  {
    VolumeContainer vol(path_, true);
    ::testing::internal::CaptureStderr();
    vol.unlock(kPassword);
    vol.check_stream_size();
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("left as it is"), std::string::npos) << log;
  }
  EXPECT_EQ(file_size(), good + (5 << 20));
  // One damaged copy (checksum) is the same case.
  corrupt_bytes(kVolumeSlotBytes + 100, 16, 0x5a);
  {
    VolumeContainer vol(path_, true);
    vol.unlock(kPassword);
    vol.check_stream_size();
  }
  EXPECT_EQ(file_size(), good + (5 << 20));
}

// A grow after a fallback writes over the copy that failed, one generation above the one in use.
TEST_F(VolumeContainerTest, GrowAfterAFallbackReplacesTheForgedCopy) {
  create(4 << 20);
  forge_slot(1, 1000, edited_config([](VaultConfig& c) { c.volume_size = 1 << 20; }));
  {
    VolumeContainer vol(path_, true);
    EXPECT_EQ(vol.grow(8 << 20, kPassword), 4u << 20);
  }
  VolumeContainer vol(path_, false);
  ASSERT_EQ(vol.header().copies.size(), 2u);
  EXPECT_EQ(vol.header().copies.front().slot, 1);
  EXPECT_EQ(vol.header().copies.front().generation, 2u);
  ::testing::internal::CaptureStderr();
  vol.unlock(kPassword);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "no fallback any more";
  EXPECT_EQ(vol.config().volume_size, 8u << 20);
  vol.check_stream_size();
}

// A forged newest copy asking for an expensive scrypt is passed over without running it; a
// container whose every copy asks for one is refused, unless allowed.
TEST_F(VolumeContainerTest, ExpensiveKdfIsRefusedBeforeScryptRuns) {
  create(1 << 20);
  // log N = 20 with p = 4: about 20 s and 1 GiB, were it run.
  forge_slot(1, 2, edited_config([](VaultConfig& c) { c.slots.at(0).scrypt = ScryptParams{20, 8, 4}; }));
  {
    VolumeContainer vol(path_, false);
    EXPECT_NO_THROW(vol.check_kdf_cost(KdfPolicy::RefuseAboveInit)) << "copy 0 is within what create makes";
    const auto t0 = std::chrono::steady_clock::now();
    ::testing::internal::CaptureStderr();
    vol.unlock(kPassword);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    EXPECT_NE(log.find("asks for a scrypt cost above"), std::string::npos) << log;
    EXPECT_EQ(vol.header().copies.front().slot, 1);
    EXPECT_EQ(vol.config().slots.at(0).scrypt.p, 1);
  }
  // Both copies expensive (p = 2 is cheap to run here, but no create ever wrote it).
  fsys::remove(path_);
  SecretBytes master;
  VaultConfig c = VaultConfig::create(kPassword, 4096, ScryptParams{10, 8, 2}, VaultKind::Volume, &master);
  c.volume_size = 1 << 20;
  c.seal(master);
  VolumeContainer::create(path_, c);
  VolumeContainer vol(path_, true);
  try {
    vol.check_kdf_cost(KdfPolicy::RefuseAboveInit);
    FAIL() << "accepted";
  } catch (const ExpensiveKdf& e) {
    EXPECT_NE(std::string(e.what()).find("p=2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(vol.unlock(kPassword), ExpensiveKdf);
  EXPECT_THROW(vol.grow(2 << 20, kPassword), ExpensiveKdf);
  EXPECT_NO_THROW(vol.check_kdf_cost(KdfPolicy::AllowExpensive));
  EXPECT_EQ(vol.unlock(kPassword, KdfPolicy::AllowExpensive), master);
}

// The container is a file the user names: a FIFO, directory or device there is refused at once,
// never opened in a way that blocks; a symbolic link to a container is followed as usual.
TEST_F(VolumeContainerTest, FifoDirectoryAndDeviceAreRefusedAtOnce) {
  auto refused = [](const std::string& path, bool writable, const char* word) {
    auto fut = std::async(std::launch::async, [&]() -> std::string {
      try {
        VolumeContainer vol(path, writable);
      } catch (const UserError& e) {
        return e.what();
      }
      return "accepted";
    });
    if (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << path << ": opening the container blocked";
      std::abort();
    }
    const std::string m = fut.get();
    EXPECT_NE(m.find(word), std::string::npos) << path << ": " << m;
  };
  const std::string fifo = dir_ + "/fifo.gcv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  refused(fifo, false, "FIFO");
  refused(fifo, true, "FIFO");
  fsys::create_directory(dir_ + "/dir.gcv");
  refused(dir_ + "/dir.gcv", false, "directory");
  refused("/dev/null", false, "character device");
  create(1 << 20);
  fsys::create_symlink(path_, dir_ + "/link.gcv");
  VolumeContainer vol(dir_ + "/link.gcv", false);
  EXPECT_NO_THROW(vol.unlock(kPassword));
}

TEST(VolumeHeaderDecode, NewestFirstDamageNamedShortBlocksEmpty) {
  SecretBytes master;
  VaultConfig c = VaultConfig::create("pw", 4096, ScryptParams{10, 8, 1}, VaultKind::Volume, &master);
  c.volume_size = 1 << 20;
  std::vector<std::uint8_t> block(kVolumeSlots * kVolumeSlotBytes);
  auto put = [&](int slot, const std::vector<std::uint8_t>& bytes) {
    std::copy(bytes.begin(), bytes.end(), block.begin() + slot * kVolumeSlotBytes);
  };
  put(0, encode_volume_slot(c, 3));
  put(1, encode_volume_slot(c, 9));
  VolumeHeader h = decode_volume_header(block);
  ASSERT_EQ(h.copies.size(), 2u);
  EXPECT_EQ(h.copies[0].slot, 1);
  EXPECT_EQ(h.copies[0].generation, 9u);
  EXPECT_EQ(h.copies[1].slot, 0);
  EXPECT_TRUE(h.damage.empty());
  block[kVolumeSlotBytes + 50] ^= 1;
  h = decode_volume_header(block);
  ASSERT_EQ(h.copies.size(), 1u);
  EXPECT_EQ(h.copies[0].slot, 0);
  EXPECT_NE(h.damage.find("copy 1: its checksum does not match"), std::string::npos) << h.damage;
  h = decode_volume_header(std::span<const std::uint8_t>(block.data(), kVolumeSlotBytes));
  EXPECT_EQ(h.copies.size(), 1u);
  EXPECT_EQ(h.empty, 1);
  EXPECT_EQ(decode_volume_header({}).empty, kVolumeSlots);
}

// Key slots in a container: a header of config version 1 (every volume made before key slots)
// keeps opening and growing under its password, and is upgraded by writing the new config to
// both header copies; a slot removed there opens neither copy.
TEST_F(VolumeContainerTest, VersionOneHeaderOpensGrowsAndTakesKeySlotsInBothCopies) {
  const ScryptParams cheap{10, 8, 1};
  const std::string key_file = std::string("\0key file\n", 10);
  SecretBytes master;
  VolumeContainer::create(path_, test::version1_config(kPassword, 65536, cheap, VaultKind::Volume, &master,
                                                       kFormatVersion, 1 << 20));
  {
    VolumeContainer vol(path_, true);
    EXPECT_EQ(vol.unlock(kPassword), master);
    EXPECT_EQ(vol.opened_slot(), -1);
    EXPECT_EQ(vol.grow(2 << 20, kPassword), 1u << 20);
    EXPECT_EQ(vol.config().config_version, kConfigVersionSingleKey) << "a grow keeps the config version";
  }
  {
    VolumeContainer vol(path_, true);
    EXPECT_EQ(vol.unlock(kPassword), master);
    EXPECT_EQ(vol.config().volume_size, 2u << 20);
    VaultConfig next = vol.config();
    next.upgrade_to_key_slots(master, kPassword);
    EXPECT_EQ(next.add_slot(master, key_file, KeySlotKind::KeyFile, cheap), 1);
    vol.replace_config(next);
  }
  const VolumeHeader h = VolumeContainer::read_header(path_);
  ASSERT_EQ(h.copies.size(), 2u);
  for (const auto& copy : h.copies) {
    EXPECT_EQ(copy.config.config_version, kConfigVersionKeySlots) << "copy " << copy.slot;
    EXPECT_EQ(copy.config.slots.size(), 2u) << "copy " << copy.slot;
    EXPECT_EQ(copy.config.volume_size, 2u << 20) << "copy " << copy.slot;
  }
  {
    VolumeContainer vol(path_, true);
    EXPECT_EQ(vol.unlock(key_file, KdfPolicy::RefuseAboveInit, KeySlotKind::KeyFile), master);
    EXPECT_EQ(vol.opened_slot(), 1);
    // A grow with key slots makes the digest again and touches no slot.
    EXPECT_EQ(vol.grow(4 << 20, key_file, KdfPolicy::RefuseAboveInit, KeySlotKind::KeyFile), 2u << 20);
    vol.check_stream_size();
  }
  {
    VolumeContainer vol(path_, true);
    EXPECT_EQ(vol.unlock(kPassword), master);
    EXPECT_EQ(vol.opened_slot(), 0);
    EXPECT_EQ(vol.config().volume_size, 4u << 20);
    VaultConfig next = vol.config();
    next.remove_slot(0);
    vol.replace_config(next);
  }
  VolumeContainer vol(path_, true);
  EXPECT_THROW(vol.unlock(kPassword), WrongPassword) << "a removed slot must open neither header copy";
  EXPECT_EQ(vol.unlock(key_file, KdfPolicy::RefuseAboveInit, KeySlotKind::KeyFile), master);
}

// More slots than a 4 KiB header copy holds are refused before either copy is written.
TEST_F(VolumeContainerTest, KeySlotsBeyondTheHeaderCopyAreRefusedAndNothingIsWritten) {
  create(1 << 20);
  VolumeContainer vol(path_, true);
  const SecretBytes master = vol.unlock(kPassword);
  VaultConfig next = vol.config();
  int fitted = 1;
  for (;; ++fitted) {
    next.add_slot(master, "pw " + std::to_string(fitted), KeySlotKind::Password, ScryptParams{10, 8, 1});
    if (next.to_json(-1).size() > kVolumeSlotBytes - 52) break;
  }
  EXPECT_GE(fitted, 13) << "docs/FORMAT.md says 14 fit";
  const auto before = header_bytes();
  EXPECT_THROW(vol.replace_config(next), UserError);
  EXPECT_EQ(header_bytes(), before);
  next.remove_slot(fitted);
  EXPECT_NO_THROW(vol.replace_config(next));
}

}  // namespace
}  // namespace gcfs
