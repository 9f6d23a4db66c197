// The re-key's shared pieces: the plan (a new master key and the config that keeps the chosen
// slots, each under its own secret) and the record a resumed re-key starts from (authenticated
// under the old master key, every byte of it).
#include <gtest/gtest.h>

#include <string>

#include "crypto/errors.h"
#include "crypto/rekey_plan.h"
#include "crypto/rekey_record.h"
#include "crypto/vault_config.h"
#include "support/version1_config.h"

namespace gcfs {
namespace {

const ScryptParams kCheap{10, 8, 1};
const ScryptParams kCheap11{11, 8, 1};

struct Slotted {
  VaultConfig config;
  SecretBytes master;
};

// 0 "pw-0", 1 a key file "kf" (at another cost), 2 "pw-2".
Slotted three_slots() {
  Slotted s;
  s.config = VaultConfig::create("pw-0", 4096, kCheap, VaultKind::Directory, &s.master, 2);
  s.config.add_slot(s.master, "kf", KeySlotKind::KeyFile, kCheap11);
  s.config.add_slot(s.master, "pw-2", KeySlotKind::Password, kCheap);
  return s;
}

bool same(const SecretBytes& a, const SecretBytes& b) {
  return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data());
}

TEST(RekeyPlan, KeptSlotsOpenTheNewKeyWithTheirOldSecretsAndTheOldKeyIsRefused) {
  Slotted s = three_slots();
  const RekeyPlan p = make_rekey_plan(s.config, s.master,
                                      {{0, KeySlotKind::Password, "pw-0", true}, {1, KeySlotKind::KeyFile, "kf", false},
                                       {2, KeySlotKind::Password, "pw-2", false}});
  EXPECT_FALSE(same(p.new_master, s.master));
  const VaultConfig c = VaultConfig::from_json(p.new_config.to_json());
  ASSERT_EQ(c.slots.size(), 3u);
  EXPECT_EQ(c.slots[1].kind, KeySlotKind::KeyFile);
  EXPECT_EQ(c.slots[1].scrypt.log_n, 11);
  EXPECT_TRUE(same(c.unlock("pw-0"), p.new_master));
  EXPECT_TRUE(same(c.unlock("kf", KdfPolicy::RefuseAboveInit, KeySlotKind::KeyFile), p.new_master));
  EXPECT_TRUE(same(c.unlock("pw-2"), p.new_master));
  EXPECT_TRUE(c.master_key_matches(p.new_master));
  EXPECT_FALSE(c.master_key_matches(s.master));  // the old master key is not this config's
  EXPECT_NE(c.slots[0].salt, s.config.slots[0].salt);
}

TEST(RekeyPlan, DroppedSlotsAreGoneAndNumbersStay) {
  Slotted s = three_slots();
  const RekeyPlan p = make_rekey_plan(s.config, s.master, {{2, KeySlotKind::Password, "pw-2", false}});
  ASSERT_EQ(p.new_config.slots.size(), 1u);
  EXPECT_EQ(p.new_config.slots[0].number, 2);
  EXPECT_THROW(p.new_config.unlock("pw-0"), WrongPassword);
}

TEST(RekeyPlan, AWrongSecretForAKeptSlotRefusesBeforeAnyNewWrap) {
  Slotted s = three_slots();
  EXPECT_THROW(make_rekey_plan(s.config, s.master,
                               {{0, KeySlotKind::Password, "pw-0", true}, {2, KeySlotKind::Password, "typo", false}}),
               WrongPassword);
  EXPECT_THROW(make_rekey_plan(s.config, s.master, {{1, KeySlotKind::Password, "kf", false}}), UserError);
  EXPECT_THROW(make_rekey_plan(s.config, s.master, {{7, KeySlotKind::Password, "x", false}}), UserError);
  EXPECT_THROW(make_rekey_plan(s.config, s.master, {}), UserError);
  EXPECT_THROW(make_rekey_plan(s.config, s.master,
                               {{0, KeySlotKind::Password, "pw-0", true}, {0, KeySlotKind::Password, "pw-0", true}}),
               UserError);
}

TEST(RekeyPlan, AVersionOneConfigBecomesVersionTwoWithItsPasswordAsSlotZero) {
  SecretBytes master;
  const VaultConfig v1 = test::version1_config("old-pw", 4096, kCheap, VaultKind::Directory, &master, 2);
  ASSERT_FALSE(v1.has_key_slots());
  const RekeyPlan p = make_rekey_plan(v1, master, {{0, KeySlotKind::Password, "old-pw", false}});
  EXPECT_TRUE(p.new_config.has_key_slots());
  ASSERT_EQ(p.new_config.slots.size(), 1u);
  EXPECT_EQ(p.new_config.slots[0].scrypt.log_n, v1.scrypt.log_n);
  EXPECT_TRUE(same(VaultConfig::from_json(p.new_config.to_json()).unlock("old-pw"), p.new_master));
  EXPECT_EQ(p.new_config.version, v1.version);
  EXPECT_EQ(p.new_config.chunk_size, v1.chunk_size);
}

TEST(RekeyRecord, RoundTripsAndOpensOnlyWithTheOldMasterKey) {
  Slotted s = three_slots();
  const RekeyPlan p = make_rekey_plan(s.config, s.master, {{0, KeySlotKind::Password, "pw-0", true}});
  const RekeyRecord r = RekeyRecord::make(s.master, p.new_master, p.new_config.to_json());
  const std::vector<std::uint8_t> bytes = r.to_bytes();
  const RekeyRecord back = RekeyRecord::from_bytes(bytes);
  EXPECT_EQ(back.new_config_json, p.new_config.to_json());
  auto opened = back.open(s.master);
  ASSERT_TRUE(opened);
  EXPECT_TRUE(same(*opened, p.new_master));
  EXPECT_FALSE(back.open(p.new_master));
  // The new key never appears in the record's bytes.
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_EQ(text.find(std::string(reinterpret_cast<const char*>(p.new_master.data()), 32)), std::string::npos);
}

TEST(RekeyRecord, EveryTruncationAndEveryFlippedByteIsRefused) {
  Slotted s = three_slots();
  SecretBytes fresh(32);
  fresh.data()[0] = 1;
  const std::vector<std::uint8_t> bytes = RekeyRecord::make(s.master, fresh, "{\"a\":1}").to_bytes();
  for (std::size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(RekeyRecord::from_bytes(std::span(bytes.data(), n)), CorruptData) << n;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::vector<std::uint8_t> b = bytes;
    b[i] ^= 0x40;
    try {
      EXPECT_FALSE(RekeyRecord::from_bytes(b).open(s.master)) << i;
    } catch (const CorruptData&) {
      // refused by its layout: as good
    }
  }
}

}  // namespace
}  // namespace gcfs
