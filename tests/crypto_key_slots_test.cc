// Key slots (config version 2): each slot opens the same master key with its own secret, slots
// come and go without the others' secrets, and every edit of the config by someone without a
// secret is refused with the error the CLI turns into its exit status (WrongPassword: 12,
// CorruptData and ExpensiveKdf: 23), never a vault read differently.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "crypto/base64url.h"
#include "crypto/errors.h"
#include "crypto/vault_config.h"
#include "support/version1_config.h"

namespace gcfs {
namespace {

using json = nlohmann::json;

const ScryptParams kCheap{10, 8, 1};
// A key file's content: any bytes, a NUL and newlines among them.
const std::string kKeyFile = std::string("\x00\x01key\nfile\r\n\xff", 13) + std::string(3000, '\x7f');

struct Slotted {
  VaultConfig config;
  SecretBytes master;
};

// Three slots: 0 "pw-0" (from create), 1 "pw-1", 2 the key file.
Slotted three_slots() {
  Slotted s;
  s.config = VaultConfig::create("pw-0", 4096, kCheap, VaultKind::Directory, &s.master, 2);
  EXPECT_EQ(s.config.add_slot(s.master, "pw-1", KeySlotKind::Password, kCheap), 1);
  EXPECT_EQ(s.config.add_slot(s.master, kKeyFile, KeySlotKind::KeyFile, kCheap), 2);
  return s;
}

VaultConfig edited(const VaultConfig& c, const std::function<void(json&)>& f) {
  json j = json::parse(c.to_json());
  f(j);
  return VaultConfig::from_json(j.dump(2));
}

int opened_by(const VaultConfig& c, std::string_view secret, KeySlotKind kind, const SecretBytes& want) {
  int slot = -7;
  EXPECT_EQ(c.unlock(secret, KdfPolicy::RefuseAboveInit, kind, &slot), want);
  return slot;
}

TEST(KeySlots, EverySlotOpensTheSameMasterKeyAndSaysWhichOpened) {
  const Slotted s = three_slots();
  const VaultConfig back = VaultConfig::from_json(s.config.to_json());
  EXPECT_EQ(back.config_version, kConfigVersionKeySlots);
  ASSERT_EQ(back.slots.size(), 3u);
  EXPECT_EQ(opened_by(back, "pw-0", KeySlotKind::Password, s.master), 0);
  EXPECT_EQ(opened_by(back, "pw-1", KeySlotKind::Password, s.master), 1);
  EXPECT_EQ(opened_by(back, kKeyFile, KeySlotKind::KeyFile, s.master), 2);
  // A secret opens only the slots of its kind: the key file's bytes typed as a password open
  // nothing, and so does a password given as a key file.
  EXPECT_THROW(back.unlock(kKeyFile, KdfPolicy::RefuseAboveInit, KeySlotKind::Password), WrongPassword);
  EXPECT_THROW(back.unlock("pw-0", KdfPolicy::RefuseAboveInit, KeySlotKind::KeyFile), WrongPassword);
  EXPECT_THROW(back.unlock("pw-2"), WrongPassword);
  // One byte of the key file changed, or cut short, opens nothing.
  std::string changed = kKeyFile;
  changed[1500] ^= 1;
  EXPECT_THROW(back.unlock(changed, KdfPolicy::RefuseAboveInit, KeySlotKind::KeyFile), WrongPassword);
  EXPECT_THROW(back.unlock(kKeyFile.substr(0, kKeyFile.size() - 1), KdfPolicy::RefuseAboveInit, KeySlotKind::KeyFile),
               WrongPassword);
  // The JSON says each slot's kind and cost, never a secret.
  const json j = json::parse(s.config.to_json());
  EXPECT_FALSE(j.contains("kdf"));
  EXPECT_FALSE(j.contains("encrypted_key"));
  EXPECT_EQ(j["keyslots"][2]["type"], "keyfile");
  EXPECT_EQ(j["keyslots"][1]["kdf"]["log_n"], 10);
  EXPECT_EQ(base64_decode(j["digest"].get<std::string>())->size(), 32u);
}

TEST(KeySlots, RemovedSlotOpensNothingAndTheLastIsKept) {
  Slotted s = three_slots();
  s.config.remove_slot(1);
  const VaultConfig back = VaultConfig::from_json(s.config.to_json());
  EXPECT_THROW(back.unlock("pw-1"), WrongPassword);
  EXPECT_EQ(opened_by(back, "pw-0", KeySlotKind::Password, s.master), 0);
  EXPECT_EQ(opened_by(back, kKeyFile, KeySlotKind::KeyFile, s.master), 2);
  // Numbers are stable; the next slot takes the lowest free one.
  EXPECT_EQ(s.config.add_slot(s.master, "pw-again", KeySlotKind::Password, kCheap), 1);
  s.config.remove_slot(0);
  s.config.remove_slot(1);
  EXPECT_THROW(s.config.remove_slot(7), UserError) << "no such slot";
  try {
    s.config.remove_slot(2);
    ADD_FAILURE() << "the last slot was removed";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("last"), std::string::npos) << e.what();
  }
  EXPECT_EQ(opened_by(s.config, kKeyFile, KeySlotKind::KeyFile, s.master), 2);
}

TEST(KeySlots, AtMostThirtyTwoAreWrittenOrRead) {
  Slotted s;
  s.config = VaultConfig::create("pw", 4096, kCheap, VaultKind::Directory, &s.master, 2);
  for (int i = 1; i < kMaxKeySlots; ++i) s.config.add_slot(s.master, "pw" + std::to_string(i), KeySlotKind::Password, kCheap);
  EXPECT_THROW(s.config.add_slot(s.master, "one more", KeySlotKind::Password, kCheap), UserError);
  EXPECT_EQ(opened_by(VaultConfig::from_json(s.config.to_json()), "pw31", KeySlotKind::Password, s.master), 31);
  // A 33rd slot planted in the file is damage, refused before any slot is tried.
  try {
    edited(s.config, [](json& j) {
      json extra = j["keyslots"][0];
      extra["slot"] = 0;
      j["keyslots"].push_back(extra);
    });
    ADD_FAILURE() << "33 slots read";
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("33 key slots"), std::string::npos) << e.what();
  }
}

// What someone who can write the config but knows no secret can do to it.
TEST(KeySlots, EditsWithoutASecretAreRefused) {
  const Slotted s = three_slots();
  // A slot's wrap changed: that slot opens nothing (12); the others still open.
  const VaultConfig wrap = edited(s.config, [](json& j) {
    j["keyslots"][1]["encrypted_key"]["ciphertext"] = base64_encode(std::vector<std::uint8_t>(32, 1));
  });
  EXPECT_THROW(wrap.unlock("pw-1"), WrongPassword);
  EXPECT_EQ(opened_by(wrap, "pw-0", KeySlotKind::Password, s.master), 0);
  // A slot's cost raised within init's range, its salt or its number changed: its wrap fails.
  for (const auto& f : std::vector<std::function<void(json&)>>{
           [](json& j) { j["keyslots"][1]["kdf"]["log_n"] = 11; },
           [](json& j) { j["keyslots"][1]["kdf"]["salt"] = base64_encode(std::vector<std::uint8_t>(32, 9)); },
           [](json& j) { j["keyslots"][1]["slot"] = 9; }})
    EXPECT_THROW(edited(s.config, f).unlock("pw-1"), WrongPassword);
  EXPECT_THROW(edited(s.config, [](json& j) { j["keyslots"][2]["type"] = "password"; })
                   .unlock(kKeyFile, KdfPolicy::RefuseAboveInit, KeySlotKind::Password),
               WrongPassword);
  // A cost above init's: refused before any scrypt runs, whatever the secret (23).
  EXPECT_THROW(edited(s.config, [](json& j) { j["keyslots"][2]["kdf"]["p"] = 4; }).unlock("pw-0"), ExpensiveKdf);
  // A field that decides how the vault is read: every slot's wrap is bound to it.
  for (const auto& f : std::vector<std::function<void(json&)>>{
           [](json& j) { j["chunk_size"] = 65536; },
           [](json& j) { j["version"] = 1; },
           [](json& j) { j["features"].erase(j["features"].size() - 1); }})
    EXPECT_THROW(edited(s.config, f).unlock("pw-0"), WrongPassword);
  // Every slot removed from the file: damage, said plainly.
  try {
    edited(s.config, [](json& j) { j["keyslots"] = json::array(); });
    ADD_FAILURE() << "a config without slots read";
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("no key slot left"), std::string::npos) << e.what();
  }
  // Shapes never written: a slot twice, mixed versions, a newer config version.
  EXPECT_THROW(edited(s.config, [](json& j) { j["keyslots"][1]["slot"] = 0; }), CorruptData);
  EXPECT_THROW(edited(s.config, [](json& j) { j["kdf"] = json::object(); }), CorruptData);
  EXPECT_THROW(edited(s.config, [](json& j) { j.erase("config_version"); }), CorruptData);
  EXPECT_THROW(edited(s.config, [](json& j) { j.erase("digest"); }), CorruptData);
  EXPECT_THROW(edited(s.config, [](json& j) { j["config_version"] = 3; }), UserError);
  EXPECT_THROW(edited(s.config, [](json& j) { j["keyslots"][0]["type"] = "tpm2"; }), CorruptData);
}

// A slot planted by someone with their own master key (a slot copied from a vault they made, with
// the same fixed fields, under a password they know) opens, but the digest refuses its key: the
// vault is never read with it.
TEST(KeySlots, PlantedSlotOfAnotherMasterKeyIsRefusedByTheDigest) {
  const Slotted s = three_slots();
  SecretBytes theirs;
  const VaultConfig other = VaultConfig::create("attacker", 4096, kCheap, VaultKind::Directory, &theirs, 2);
  const VaultConfig planted = edited(s.config, [&](json& j) {
    json slot = json::parse(other.to_json())["keyslots"][0];
    j["keyslots"].erase(0);  // the victim's slot 0 goes, and the other config's slot 0 takes its number
    j["keyslots"].push_back(slot);
  });
  try {
    planted.unlock("attacker");
    ADD_FAILURE() << "a planted slot opened the vault";
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("digest does not match"), std::string::npos) << e.what();
  }
  EXPECT_EQ(opened_by(planted, "pw-1", KeySlotKind::Password, s.master), 1);
  // The digest binds the fields a slot's wrap is not bound to: a volume's size.
  SecretBytes vm;
  VaultConfig vol = VaultConfig::create("v", 65536, kCheap, VaultKind::Volume, &vm);
  vol.volume_size = 1 << 20;
  vol.seal(vm);
  EXPECT_EQ(VaultConfig::from_json(vol.to_json()).unlock("v"), vm);
  EXPECT_THROW(edited(vol, [](json& j) { j["volume_size"] = 4 << 20; }).unlock("v"), CorruptData);
  EXPECT_TRUE(vol.master_key_matches(vm));
  EXPECT_FALSE(vol.master_key_matches(theirs));
}

// A config of version 1 keeps opening with its password; the upgrade keeps that password as slot
// 0, at its cost, and adds no other way in.
TEST(KeySlots, VersionOneConfigUpgradesInMemoryKeepingItsPassword) {
  SecretBytes master;
  VaultConfig v1 = test::version1_config("old", 4096, ScryptParams{11, 8, 1}, VaultKind::Directory, &master, 2);
  const VaultConfig read = VaultConfig::from_json(v1.to_json());
  EXPECT_EQ(read.config_version, kConfigVersionSingleKey);
  int slot = 5;
  EXPECT_EQ(read.unlock("old", KdfPolicy::RefuseAboveInit, KeySlotKind::Password, &slot), master);
  EXPECT_EQ(slot, -1);
  EXPECT_THROW(read.unlock("old", KdfPolicy::RefuseAboveInit, KeySlotKind::KeyFile), WrongPassword);
  VaultConfig up = read;
  up.upgrade_to_key_slots(master, "old");
  const VaultConfig back = VaultConfig::from_json(up.to_json());
  ASSERT_EQ(back.slots.size(), 1u);
  EXPECT_EQ(back.slots[0].scrypt.log_n, 11);
  EXPECT_EQ(back.version, 2) << "the content format is untouched";
  EXPECT_EQ(opened_by(back, "old", KeySlotKind::Password, master), 0);
  EXPECT_FALSE(json::parse(up.to_json()).contains("kdf"));
}

// passwd on a config with slots: the slot named changes (its kind too), the others stay.
TEST(KeySlots, RewrapChangesOneSlotOnly) {
  Slotted s = three_slots();
  s.config.rewrap_slot(1, s.master, kKeyFile + "2", KeySlotKind::KeyFile);
  const VaultConfig back = VaultConfig::from_json(s.config.to_json());
  EXPECT_THROW(back.unlock("pw-1"), WrongPassword);
  EXPECT_EQ(opened_by(back, kKeyFile + "2", KeySlotKind::KeyFile, s.master), 1);
  EXPECT_EQ(opened_by(back, "pw-0", KeySlotKind::Password, s.master), 0);
  EXPECT_THROW(s.config.rewrap(s.master, "which one?"), UserError) << "several slots: rewrap() cannot choose";
}

}  // namespace
}  // namespace gcfs
