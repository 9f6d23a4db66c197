// rekey's options: which slots keep which secrets, the refusals that come before anything
// changes, and the progress line's words.
#include <gtest/gtest.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>

#include "crypto/errors.h"
#include "crypto/vault_config.h"
#include "mount/cli/rekey_options.h"
#include "mount/cli/rekey_progress.h"

namespace gcfs::cli {
namespace {

namespace po = boost::program_options;
const ScryptParams kCheap{10, 8, 1};

struct Fixture {
  VaultConfig cfg;
  SecretBytes master;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("rekey_opts_" + std::to_string(::getpid()));
  Fixture() {
    cfg = VaultConfig::create("pw-0", 4096, kCheap, VaultKind::Directory, &master, 2);
    cfg.add_slot(master, "pw-1", KeySlotKind::Password, kCheap);
    cfg.add_slot(master, "kf-2", KeySlotKind::KeyFile, kCheap);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "p1") << "pw-1\n";
    std::ofstream(dir / "k2") << "kf-2";
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
  UnlockSecret unlocking() const { return {SecretString("pw-0"), KeySlotKind::Password}; }
};

TEST(RekeyOptions, FilesGiveEachSlotItsSecret) {
  Fixture f;
  RekeySlotArgs a;
  a.slot_passfiles = {"1=" + (f.dir / "p1").string()};
  a.slot_keyfiles = {"2=" + (f.dir / "k2").string()};
  const KeptSlotSecrets k = gather_kept_slot_secrets(a, f.cfg, 0, f.unlocking(), false);
  ASSERT_EQ(k.entries.size(), 3u);
  EXPECT_TRUE(k.entries[0].verified);
  EXPECT_EQ(k.entries[1].secret.view(), "pw-1");
  EXPECT_EQ(k.entries[2].secret.view(), "kf-2");
  EXPECT_EQ(k.entries[2].kind, KeySlotKind::KeyFile);
  EXPECT_TRUE(k.dropped.empty());
}

TEST(RekeyOptions, ASlotWithoutASecretRefusesNonInteractivelyNamingIt) {
  Fixture f;
  RekeySlotArgs a;
  a.slot_passfiles = {"1=" + (f.dir / "p1").string()};
  try {
    gather_kept_slot_secrets(a, f.cfg, 0, f.unlocking(), false);
    FAIL() << "no refusal";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("key slot 2 has no secret"), std::string::npos) << e.what();
  }
  a.drop_slots = {2};
  const KeptSlotSecrets k = gather_kept_slot_secrets(a, f.cfg, 0, f.unlocking(), false);
  EXPECT_EQ(k.entries.size(), 2u);
  EXPECT_EQ(k.dropped, std::vector<int>{2});
}

TEST(RekeyOptions, KeepOnlyUnlockingSlotDropsTheRest) {
  Fixture f;
  RekeySlotArgs a;
  a.keep_only_unlocking_slot = true;
  const KeptSlotSecrets k = gather_kept_slot_secrets(a, f.cfg, 1, {SecretString("pw-1"), KeySlotKind::Password}, false);
  ASSERT_EQ(k.entries.size(), 1u);
  EXPECT_EQ(k.entries[0].number, 1);
  EXPECT_EQ(k.dropped, (std::vector<int>{0, 2}));
}

TEST(RekeyOptions, BadArgumentsAreUsageErrors) {
  Fixture f;
  auto refuse = [&](RekeySlotArgs a) { EXPECT_THROW(gather_kept_slot_secrets(a, f.cfg, 0, f.unlocking(), false), po::error); };
  RekeySlotArgs a;
  a.slot_passfiles = {"x=/f"};
  refuse(a);
  a.slot_passfiles = {"9=/f"};  // no slot 9
  refuse(a);
  a.slot_passfiles = {"0=/f"};  // the unlocking slot
  refuse(a);
  a.slot_passfiles = {"2=" + (f.dir / "k2").string()};  // a key file slot given a password
  refuse(a);
  a.slot_passfiles = {};
  a.drop_slots = {0};
  refuse(a);
}

TEST(RekeyProgressLine, SaysBytesFilesRateAndTimeLeft) {
  RekeyCounts c;
  c.bytes_done = std::uint64_t{1} << 30, c.bytes_total = std::uint64_t{4} << 30, c.files_done = 100, c.files_total = 400;
  const std::string line = rekey_progress_line(c, 10);
  EXPECT_NE(line.find("1 GiB of 4 GiB"), std::string::npos) << line;
  EXPECT_NE(line.find("100 of 400 files"), std::string::npos) << line;
  EXPECT_NE(line.find("/s"), std::string::npos) << line;
  EXPECT_NE(line.find("0:30 left"), std::string::npos) << line;
  c.read_s = 1.5, c.cipher_s = 0.5, c.write_s = 2;
  const std::string sum = rekey_summary_line(c, 4);
  EXPECT_NE(sum.find("read 1.5 s, cipher 0.5 s, write 2.0 s"), std::string::npos) << sum;
}

}  // namespace
}  // namespace gcfs::cli
