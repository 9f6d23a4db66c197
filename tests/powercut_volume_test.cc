// A volume container on the power-cut harness (tests/powercut/README.md). Drop all unsynced: ext4
// inside through a loop device, files fsynced there, then the volume daemon killed, the power cut
// and everything mounted again: every fsynced file reads back, e2fsck and volume fsck are clean.
// volume rekey cut at each of its writes, torn or not, then run again: nothing is lost.
// A torn partial overwrite of volume.img (off unless GPUCRYPTFS_TEST_TORN=1): volumes are not
// journaled, so a torn chunk reads as EIO today.
//
// Needs root, /dev/fuse and loop devices; skips itself otherwise.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "support/powercut_harness.h"
#include "support/powercut_workload.h"

namespace gcfs::test {
namespace {

class PowercutVolume : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (loop devices, mount)";
    if (::access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "needs /dev/fuse";
    GCFS_REQUIRE_PROGRAM("mkfs.ext4");
    GCFS_REQUIRE_PROGRAM("losetup");
    disk_ = std::make_unique<PowercutDisk>();
    container_ = disk_->mountpoint() + "/vol.gcv";
    mnt_ = local_.path() + "/mnt";
    fs_ = local_.path() + "/fs";
    passfile_ = local_.path() + "/pass";
    ::mkdir(mnt_.c_str(), 0755);
    ::mkdir(fs_.c_str(), 0755);
    write_file(passfile_, "volume power cut\n");
    ::chmod(passfile_.c_str(), 0600);
  }
  void TearDown() override {
    crash();
    disk_.reset();
  }

  CommandResult create(const std::string& extra = "", const std::string& size = "32M") {
    CommandResult r = run_shell(test_binary() + " volume create --scrypt-logn 10 --size " + size + " --passfile " +
                                shell_quote(passfile_) + " " + extra + " " + shell_quote(container_));
    disk_->command("sync");
    return r;
  }
  CommandResult mount() {
    CommandResult r = run_shell(test_binary() + " volume mount --engine " + test_engine() + transport_arg() +
                                " --passfile " + shell_quote(passfile_) + " --log " + shell_quote(log()) + " " +
                                shell_quote(container_) + " " + shell_quote(mnt_));
    if (r.status == 0) pid_ = daemon_pid();
    return r;
  }
  // Loop device over volume.img, ext4 mounted on fs_ (mkfs first when asked).
  CommandResult attach(bool mkfs) {
    CommandResult r = run_shell("losetup -f --show " + shell_quote(image()));
    if (r.status != 0) return r;
    loop_ = r.output.substr(0, r.output.find('\n'));
    if (mkfs) {
      r = run_shell("mkfs.ext4 -q -F " + shell_quote(loop_));
      if (r.status != 0) return r;
    }
    return run_shell("mount " + shell_quote(loop_) + " " + shell_quote(fs_));
  }
  // Everything let go as a crash does: the daemon killed first, then ext4, the loop, the FUSE mount.
  void crash() {
    if (pid_ > 0 && process_alive(pid_)) ::kill(pid_, SIGKILL);
    for (int i = 0; i < 400 && pid_ > 0 && process_alive(pid_); ++i) ::usleep(25000);
    pid_ = -1;
    detach();
  }
  void detach() {
    if (listed_in_mount_table(fs_) && run_shell("timeout 30 umount " + shell_quote(fs_)).status != 0)
      run_shell("umount -l " + shell_quote(fs_));
    if (!loop_.empty()) {
      for (int i = 0; i < 50 && run_shell("losetup -d " + shell_quote(loop_)).status != 0; ++i) ::usleep(100000);
      loop_.clear();
    }
    unmount_dir(mnt_);
    for (int i = 0; i < 400 && pid_ > 0 && process_alive(pid_); ++i) ::usleep(25000);
    pid_ = -1;
  }
  CommandResult volume_fsck() {
    return run_shell(test_binary() + " volume fsck --passfile " + shell_quote(passfile_) + " " +
                     shell_quote(container_));
  }
  std::string log() const { return local_.path() + "/daemon.log"; }
  std::string image() const { return mnt_ + "/volume.img"; }
  pid_t daemon_pid() const {
    std::istringstream in(read_file(log()));
    pid_t pid = -1;
    for (std::string line; std::getline(in, line);) {
      if (line.find("mounted on " + mnt_) == std::string::npos) continue;
      const auto b = line.find("gpucryptfs["), e = line.find(']', b);
      if (b != std::string::npos && e != std::string::npos) pid = std::stoi(line.substr(b + 11, e - b - 11));
    }
    return pid;
  }

  TempDir local_{"gcfs-pcvol"};
  std::unique_ptr<PowercutDisk> disk_;
  std::string container_, mnt_, fs_, passfile_, loop_;
  pid_t pid_ = -1;
};

TEST_F(PowercutVolume, Ext4FilesFsyncedInsideSurviveDropAllUnsynced) {
  ASSERT_EQ(create().status, 0);
  ASSERT_EQ(mount().status, 0) << read_file(log());
  CommandResult a = attach(true);
  ASSERT_EQ(a.status, 0) << a.output;
  std::mt19937_64 rng(powercut_seed(1));
  std::map<std::string, std::string> promised;
  ASSERT_EQ(::mkdir((fs_ + "/d").c_str(), 0755), 0);
  for (int i = 0; i < 24; ++i) {
    const std::string name = (i % 3 ? "d/f" : "f") + std::to_string(i);
    const std::string data = pattern(rng(), 0, 1 + rng() % 200000);
    const bool sync = rng() % 4 != 0;
    ASSERT_EQ(pwrite_at(fs_ + "/" + name, 0, data, sync, true), 0) << name;
    if (sync) {
      ASSERT_EQ(fsync_path(fs_ + "/d"), 0);
      ASSERT_EQ(fsync_path(fs_), 0);
      promised[name] = data;
    }
  }
  // Unsynced work after the last fsync: overwrites of promised files are not in the promise.
  ASSERT_EQ(pwrite_at(fs_ + "/d/unsynced", 0, pattern(9, 0, 50000), false, true), 0);
  crash();
  ASSERT_TRUE(disk_->command("cut drop"));
  ASSERT_TRUE(disk_->command("boot"));

  const CommandResult vf = volume_fsck();
  EXPECT_EQ(vf.status, 0) << vf.output;
  ASSERT_EQ(mount().status, 0) << read_file(log());
  a = attach(false);  // ext4 replays its journal
  ASSERT_EQ(a.status, 0) << a.output;
  for (const auto& [name, data] : promised) {
    int err = 0;
    const std::string got = read_all(fs_ + "/" + name, &err);
    EXPECT_EQ(err, 0) << name << ": " << std::strerror(err);
    EXPECT_TRUE(got == data) << name << ": " << got.size() << " bytes read, " << data.size() << " fsynced";
  }
  ASSERT_EQ(run_shell("umount " + shell_quote(fs_)).status, 0);
  const CommandResult e2 = run_shell("e2fsck -f -n " + shell_quote(loop_));
  EXPECT_EQ(e2.status, 0) << e2.output;
  detach();
}

// volume.img written and fsynced, then 300 bytes of one chunk overwritten with a cut at each write
// that makes (keeping none, all or the first sector of the torn one).
class PowercutVolumeTorn : public PowercutVolume, public ::testing::WithParamInterface<std::string> {};

TEST_P(PowercutVolumeTorn, CutAtEveryWriteOfAPartialOverwrite) {
  GCFS_REQUIRE_TORN_CASES();
  constexpr std::size_t kSize = 3 * 65536, kAt = 65536 + 1000, kLen = 300;
  const std::string old_bytes = pattern(1, 0, kSize), new_bytes = pattern(2, kAt, kLen);
  for (std::uint64_t n = 1; n < 16; ++n) {
    SCOPED_TRACE("cut at write " + std::to_string(n) + " tear " + GetParam());
    TearDown();
    SetUp();
    ASSERT_EQ(create().status, 0);
    ASSERT_EQ(mount().status, 0) << read_file(log());
    ASSERT_EQ(pwrite_at(image(), 0, old_bytes, true), 0);
    ASSERT_TRUE(disk_->command("arm " + std::to_string(n) + " " + GetParam()));
    pwrite_at(image(), kAt, new_bytes, true);  // fails when the cut comes: not checked
    if (!disk_->dead()) {
      EXPECT_GT(n, 1u) << "the overwrite made no write at all";
      return;
    }
    crash();
    ASSERT_TRUE(disk_->command("boot"));
    ASSERT_EQ(mount().status, 0) << read_file(log());
    int err = 0;
    const std::string got = read_all(image(), &err).substr(0, kSize);
    ASSERT_EQ(err, 0) << "reading volume.img: " << std::strerror(err);
    for (std::size_t i = 0; i < kSize; ++i) {
      const bool in_range = i >= kAt && i < kAt + kLen;
      ASSERT_TRUE(got[i] == old_bytes[i] || (in_range && got[i] == new_bytes[i - kAt]))
          << "byte " << i << " is neither the fsynced nor the written one";
    }
    detach();
    const CommandResult vf = volume_fsck();
    EXPECT_EQ(vf.status, 0) << vf.output;
  }
  ADD_FAILURE() << "the overwrite made 16 writes or more";
}

INSTANTIATE_TEST_SUITE_P(Tears, PowercutVolumeTorn, ::testing::Values("none", "all", "prefix:1"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& c : s)
                             if (c == ':') c = '_';
                           return s;
                         });

// volume rekey with the power cut during each of its writes in turn (the write torn: none of it
// lands, all, its first sector, or a seeded subset with the writes since the last sync lost: the
// cache reordered), then the re-key run again: the volume reads back exactly
// as it was written and fsynced, volume fsck is clean.
class PowercutVolumeRekey : public PowercutVolume, public ::testing::WithParamInterface<std::string> {};

TEST_P(PowercutVolumeRekey, CutDuringEachWriteThenRunAgain) {
  constexpr std::size_t kSize = 2 << 20;
  const std::string data = pattern(3, 0, kSize - 200000);  // the last chunks stay holes
  auto rekey = [&] {  // container_ changes with each round's fresh disk
    return run_shell(test_binary() + " volume rekey -q --engine " + test_engine() + " --passfile " +
                     shell_quote(passfile_) + " " + shell_quote(container_));
  };
  auto reads_back = [&] {
    ASSERT_EQ(mount().status, 0) << read_file(log());
    int err = 0;
    const std::string got = read_all(image(), &err);
    ASSERT_EQ(err, 0) << std::strerror(err);
    ASSERT_EQ(got.size(), kSize);
    EXPECT_TRUE(got.compare(0, data.size(), data) == 0) << "the fsynced bytes must read back";
    EXPECT_EQ(got.find_first_not_of('\0', data.size()), std::string::npos) << "the holes must read as zeros";
    detach();
    const CommandResult vf = volume_fsck();
    EXPECT_EQ(vf.status, 0) << vf.output;
  };
  for (std::uint64_t n = 1; n < 100; ++n) {
    SCOPED_TRACE("cut at write " + std::to_string(n) + " of the re-key, tear " + GetParam());
    TearDown();
    SetUp();
    ASSERT_EQ(create("", "2M").status, 0);
    ASSERT_EQ(mount().status, 0) << read_file(log());
    ASSERT_EQ(pwrite_at(image(), 0, data, true), 0);
    detach();
    ASSERT_TRUE(disk_->command("sync"));
    ASSERT_TRUE(disk_->command("arm " + std::to_string(n) + " " + GetParam()));
    const CommandResult cut = rekey();
    if (!disk_->dead()) {  // the re-key made fewer than n writes: every point was cut
      EXPECT_EQ(cut.status, 0) << cut.output;
      EXPECT_GT(n, 10u) << "a re-key makes more writes than that";
      reads_back();
      return;
    }
    EXPECT_NE(cut.status, 0);
    ASSERT_TRUE(disk_->command("boot"));
    const CommandResult again = rekey();
    ASSERT_EQ(again.status, 0) << again.output;
    reads_back();
  }
  ADD_FAILURE() << "the re-key made 100 writes or more";
}

INSTANTIATE_TEST_SUITE_P(Tears, PowercutVolumeRekey,
                         ::testing::Values("none", "all", "prefix:1", "subset:5 drop-earlier"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& c : s)
                             if (c == ':' || c == ' ' || c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace gcfs::test
