// `volume rekey` without FUSE: the in-place pass and its record (fs/volume_rekey*.h). Every byte
// written before reads back under the new key only; a re-key stopped after any segment, with the
// chunks of its hot zone torn or not, finishes when run again; a record that does not
// authenticate changes nothing; a container in the middle of a re-key is refused to everyone else.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <filesystem>
#include <random>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "crypto/key_ring.h"
#include "fs/content/content_file.h"
#include "fs/framed_block.h"
#include "fs/volume_container.h"
#include "fs/volume_rekey.h"
#include "fs/volume_rekey_record.h"
#include "support/version1_config.h"

namespace gcfs {
namespace {

namespace fsys = std::filesystem;

constexpr const char* kPassword = "correct horse";
constexpr std::uint32_t kChunk = 64 * 1024;
constexpr std::uint64_t kSize = 6 << 20;     // 96 chunks
constexpr std::uint64_t kSegment = 8 * kChunk;  // 12 segments

std::vector<std::uint8_t> random_data(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

struct Stop {};  // thrown from the progress report: a re-key that stops dead after a segment

class VolumeRekeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gcfs-volume-rekey-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/vol.gcv";
    ScryptParams p;
    p.log_n = 10;  // tests only: fast
    VaultConfig c = VaultConfig::create(kPassword, kChunk, p, VaultKind::Volume, &old_master_);
    c.volume_size = volume_size_for(kSize, kChunk);
    c.seal(old_master_);
    VolumeContainer::create(path_, c);
    // Data with holes between: chunks 0-9, a run across segments 3-5, the last chunk.
    plain_.assign(kSize, 0);
    write_plain(0, random_data(10 * kChunk - 100, 1));
    write_plain(27 * kChunk + 5, random_data(17 * kChunk, 2));
    write_plain(kSize - kChunk, random_data(kChunk, 3));
  }
  void TearDown() override { fsys::remove_all(dir_); }

  void write_plain(std::uint64_t at, const std::vector<std::uint8_t>& data) {
    VolumeContainer vol(path_, true);
    KeyRing keys(vol.unlock(kPassword));
    CpuEngine engine(1);
    ChunkLayout layout = vol.layout();
    ContentFile cf(vol.fd(), layout, engine, keys, path_);
    ASSERT_EQ(cf.write(at, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    std::copy(data.begin(), data.end(), plain_.begin() + static_cast<std::ptrdiff_t>(at));
  }

  // The new header: the one password wraps the new master key.
  static RekeyPlan plan_for(const VaultConfig& now, const SecretBytes& master) {
    return make_rekey_plan(now, master, {KeptSlot{0, KeySlotKind::Password, kPassword, true}});
  }

  // Runs (or resumes) the re-key; stop_after: throw Stop from the report after that many
  // segments (0: never).
  VolumeRekeyResult rekey(int stop_after = 0) {
    VolumeContainer vol(path_, true, true);
    const SecretBytes unlocked = vol.unlock(kPassword);
    const VaultConfig now = vol.config();
    CpuEngine engine(2);
    int reports = 0;
    auto report = [&](std::uint64_t, std::uint64_t) {
      if (stop_after && ++reports == stop_after) throw Stop{};
    };
    return rekey_volume(vol, unlocked, [&] { return plan_for(now, unlocked); }, engine, report, kSegment);
  }

  // What the volume reads as under key (all of it; EIO chunks as an error count).
  int read_errors(const SecretBytes& master, std::vector<std::uint8_t>* out) {
    VolumeContainer vol(path_, false);
    KeyRing keys(master);
    CpuEngine engine(1);
    ChunkLayout layout = vol.layout();
    ContentFile cf(vol.fd(), layout, engine, keys, path_);
    out->assign(kSize, 0);
    int errors = 0;
    for (std::uint64_t at = 0; at < kSize; at += kChunk)
      if (cf.read(at, kChunk, out->data() + at) != static_cast<ssize_t>(kChunk)) ++errors;
    return errors;
  }

  std::uint64_t file_size() const {
    struct stat st {};
    return ::stat(path_.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  }

  void expect_rekeyed(const SecretBytes& new_master) {
    std::vector<std::uint8_t> back;
    EXPECT_EQ(read_errors(new_master, &back), 0);
    EXPECT_TRUE(back == plain_) << "the volume must read back exactly";
    EXPECT_GT(read_errors(old_master_, &back), 0) << "the old master key must open no written chunk";
    VolumeContainer vol(path_, false);  // no longer refused: the re-key is over
    EXPECT_FALSE(vol.header().rekeying);
    EXPECT_EQ(vol.unlock(kPassword), new_master);
    ChunkLayout layout = vol.layout();
    EXPECT_EQ(file_size(), kVolumeConfigBlockBytes + layout.cipher_size(kSize)) << "backup areas cut off";
    EXPECT_FALSE(read_volume_rekey_copies(vol.fd(), path_).any_magic) << "the record is wiped";
  }

  std::string dir_, path_;
  SecretBytes old_master_;
  std::vector<std::uint8_t> plain_;
};

TEST_F(VolumeRekeyTest, EveryByteReadsBackUnderTheNewKeyOnly) {
  const VolumeRekeyResult r = rekey();
  EXPECT_FALSE(r.resumed);
  EXPECT_NE(r.new_master, old_master_);
  EXPECT_EQ(r.stats.resealed, 10u + 18u + 1u);
  EXPECT_TRUE(r.stats.damaged.empty());
  expect_rekeyed(r.new_master);
}

TEST_F(VolumeRekeyTest, AVersionOneHeaderIsRekeyedIntoKeySlots) {
  fsys::remove(path_);
  SecretBytes master;
  VolumeContainer::create(path_, test::version1_config(kPassword, kChunk, ScryptParams{10, 8, 1}, VaultKind::Volume,
                                                       &master, kFormatVersion, kSize));
  old_master_ = master;
  plain_.assign(kSize, 0);
  write_plain(5 * kChunk + 3, random_data(3 * kChunk, 9));
  const VolumeRekeyResult r = rekey();
  expect_rekeyed(r.new_master);
  VolumeContainer vol(path_, false);
  EXPECT_TRUE(vol.config().has_key_slots()) << "the new header is written with key slots, its password slot 0";
  EXPECT_EQ(vol.unlock(kPassword), r.new_master);
  EXPECT_EQ(vol.opened_slot(), 0);
}

TEST_F(VolumeRekeyTest, AContainerInTheMiddleOfARekeyIsRefusedToEveryoneElse) {
  EXPECT_THROW(rekey(2), Stop);
  try {
    VolumeContainer vol(path_, true);
    ADD_FAILURE() << "a mount in the middle of a re-key must be refused";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("volume rekey"), std::string::npos) << e.what();
  }
  EXPECT_THROW(VolumeContainer(path_, false), UserError);
  // A release that knows no re-key finds no header it recognises in either copy.
  std::vector<std::uint8_t> block(kVolumeSlots * kVolumeSlotBytes);
  int fd = ::open(path_.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, block.data(), block.size(), 0), static_cast<ssize_t>(block.size()));
  ::close(fd);
  for (int s = 0; s < kVolumeSlots; ++s)
    EXPECT_EQ(decode_framed_block({block.data() + s * kVolumeSlotBytes, kVolumeSlotBytes}, kVolumeMagic).state,
              FramedBlock::State::Empty);
  const VolumeRekeyResult r = rekey();
  EXPECT_TRUE(r.resumed);
  expect_rekeyed(r.new_master);
}

// A stop after each segment in turn; with the hot zone's chunks torn (half of each overwritten,
// as a kill between pages or a power cut leaves them) on odd rounds: the backup area restores them.
TEST_F(VolumeRekeyTest, StoppedAfterAnySegmentAndTornOrNotItFinishesWhenRunAgain) {
  const std::string pristine = dir_ + "/pristine.gcv";
  fsys::copy_file(path_, pristine);
  const int segments = static_cast<int>(kSize / kSegment);
  int torn = 0;
  for (int stop = 1; stop <= segments; ++stop) {
    SCOPED_TRACE("stopped after segment report " + std::to_string(stop));
    fsys::copy_file(pristine, path_, fsys::copy_options::overwrite_existing);
    EXPECT_THROW(rekey(stop), Stop);
    if (stop % 2 == 1) {
      int fd = ::open(path_.c_str(), O_RDWR);
      ASSERT_GE(fd, 0);
      const OpenedVolumeRekey o = open_volume_rekey(read_volume_rekey_copies(fd, path_), old_master_, path_);
      const ChunkLayout layout(kChunk, kVolumeConfigBlockBytes);
      const auto junk = random_data(kChunk / 2, 100 + static_cast<unsigned>(stop));
      for (std::uint64_t k = o.record.progress.hot_first; k < o.record.progress.hot_first + o.record.progress.hot_count;
           ++k) {
        std::vector<std::uint8_t> form(layout.disk_chunk_size());
        ASSERT_EQ(::pread(fd, form.data(), form.size(), static_cast<off_t>(layout.disk_offset(k))),
                  static_cast<ssize_t>(form.size()));
        if (std::all_of(form.begin(), form.end(), [](std::uint8_t b) { return b == 0; })) continue;  // a hole
        ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), static_cast<off_t>(layout.disk_offset(k) + 4096)),
                  static_cast<ssize_t>(junk.size()));
        ++torn;
      }
      ::close(fd);
    }
    const VolumeRekeyResult r = rekey();
    EXPECT_TRUE(r.resumed);
    EXPECT_TRUE(r.stats.damaged.empty());
    expect_rekeyed(r.new_master);
  }
  EXPECT_GE(torn, 10) << "the torn rounds must have torn chunks of their hot zones";
}

TEST_F(VolumeRekeyTest, ChunksDamagedBeforeAreReportedAndLeftTheRestIsRekeyed) {
  const ChunkLayout layout(kChunk, kVolumeConfigBlockBytes);
  int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const std::uint8_t flip = 0xff;
  ASSERT_EQ(::pwrite(fd, &flip, 1, static_cast<off_t>(layout.disk_offset(30) + 100)), 1);
  ::close(fd);
  const VolumeRekeyResult r = rekey();
  EXPECT_EQ(r.stats.damaged, std::vector<std::uint64_t>{30});
  std::vector<std::uint8_t> back;
  EXPECT_EQ(read_errors(r.new_master, &back), 1) << "only the damaged chunk fails, as it did before";
  std::fill(plain_.begin() + 30 * kChunk, plain_.begin() + 31 * kChunk, 0);
  EXPECT_TRUE(back == plain_);
}

TEST_F(VolumeRekeyTest, ARecordThatDoesNotAuthenticateChangesNothing) {
  EXPECT_THROW(rekey(3), Stop);
  // Someone who can write the container but holds no key plants a record with a valid checksum.
  const auto forged = encode_framed_block(kVolumeRekeyMagic, 1000, R"({"record_version":1})", kVolumeRekeyBlockBytes);
  int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  for (int b = 0; b < 2; ++b)
    ASSERT_EQ(::pwrite(fd, forged.data(), forged.size(),
                       static_cast<off_t>(kVolumeRekeyRecordOffset + b * kVolumeRekeyBlockBytes)),
              static_cast<ssize_t>(forged.size()));
  ::close(fd);
  const std::string before = dir_ + "/before.gcv";
  fsys::copy_file(path_, before);
  EXPECT_THROW(rekey(), CorruptData);
  std::ifstream a(path_, std::ios::binary), b(before, std::ios::binary);
  EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(a), {}, std::istreambuf_iterator<char>(b)))
      << "a record that does not authenticate must change nothing";
}

TEST_F(VolumeRekeyTest, OneTornRecordCopyFallsBackToTheOther) {
  EXPECT_THROW(rekey(5), Stop);
  int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const VolumeRekeyCopies copies = read_volume_rekey_copies(fd, path_);
  ASSERT_EQ(copies.bodies.size(), 2u);
  const std::vector<std::uint8_t> junk(100, 0x5a);  // the newest copy torn
  ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(),
                     static_cast<off_t>(kVolumeRekeyRecordOffset + copies.newest_block * kVolumeRekeyBlockBytes + 30)),
            static_cast<ssize_t>(junk.size()));
  ::close(fd);
  const VolumeRekeyResult r = rekey();
  expect_rekeyed(r.new_master);
}

}  // namespace
}  // namespace gcfs
