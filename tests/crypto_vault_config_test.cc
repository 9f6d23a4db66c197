// The config file of version 1 (one password wrap, every config made before key slots): unlocking
// it, and every way an edited, damaged or newer one must be refused, each with the error type the
// CLI turns into its message. Key slots (version 2): crypto_key_slots_test.cc.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "crypto/base64url.h"
#include "crypto/errors.h"
#include "crypto/vault_config.h"
#include "support/version1_config.h"

namespace gcfs {
namespace {

using json = nlohmann::json;

// log N = 10 is the smallest cost the format allows; it keeps each unlock to a few milliseconds.
const ScryptParams kCheap{10, 8, 1};

class VaultConfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    config_ = new VaultConfig(test::version1_config("pw-1", 16384, kCheap, VaultKind::Directory, &master_));
  }
  static void TearDownTestSuite() {
    delete config_;
    config_ = nullptr;
  }
  static VaultConfig* config_;
  static SecretBytes master_;

  // The config as JSON, edited by f, read back.
  static VaultConfig edited(const std::function<void(json&)>& f) {
    json j = json::parse(config_->to_json());
    f(j);
    return VaultConfig::from_json(j.dump(2));
  }
  static std::string error_of(const std::function<void(json&)>& f) {
    try {
      edited(f);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
};
VaultConfig* VaultConfigTest::config_ = nullptr;
SecretBytes VaultConfigTest::master_;

TEST_F(VaultConfigTest, CreateThenUnlockGivesTheMasterKey) {
  EXPECT_EQ(master_.size(), 32u);
  EXPECT_NE(master_, SecretBytes(32, 0));
  EXPECT_EQ(config_->unlock("pw-1"), master_);
  EXPECT_EQ(config_->chunk_size, 16384u);
  EXPECT_EQ(config_->version, kFormatVersion);
  EXPECT_EQ(config_->salt.size(), 32u);
  // A second vault gets another master key and salt.
  SecretBytes other;
  VaultConfig c2 = test::version1_config("pw-1", 16384, kCheap, VaultKind::Directory, &other);
  EXPECT_NE(other, master_);
  EXPECT_NE(c2.salt, config_->salt);
}

TEST_F(VaultConfigTest, JsonRoundTripAndReformattingKeepTheVaultOpen) {
  VaultConfig back = VaultConfig::from_json(config_->to_json());
  EXPECT_EQ(back.unlock("pw-1"), master_);
  // Whitespace and key order are not what is authenticated; the values are.
  json j = json::parse(config_->to_json());
  VaultConfig compact = VaultConfig::from_json(j.dump());
  EXPECT_EQ(compact.unlock("pw-1"), master_);
  // The format as documented.
  EXPECT_EQ(j["format"], "gpucryptfs");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["kind"], "directory");
  EXPECT_EQ(j["cipher"], "AES-256-GCM");
  EXPECT_EQ(j["kdf"]["name"], "scrypt");
  EXPECT_EQ(base64_decode(j["kdf"]["salt"].get<std::string>())->size(), 32u);
  EXPECT_EQ(base64_decode(j["encrypted_key"]["nonce"].get<std::string>())->size(), 12u);
  EXPECT_EQ(base64_decode(j["encrypted_key"]["ciphertext"].get<std::string>())->size(), 32u);
  EXPECT_EQ(base64_decode(j["encrypted_key"]["tag"].get<std::string>())->size(), 16u);
}

TEST_F(VaultConfigTest, WrongPasswordIsWrongPassword) {
  EXPECT_THROW(config_->unlock("pw-2"), WrongPassword);
  EXPECT_THROW(config_->unlock(""), WrongPassword);
  EXPECT_THROW(config_->unlock("pw-1 "), WrongPassword);
  // WrongPassword is a UserError: the CLI prints it and exits non-zero.
  try {
    config_->unlock("nope");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("password"), std::string::npos);
  }
}

// Every authenticated field, edited to another value the parser accepts, must make unlocking fail
// exactly like a wrong password: a vault must never open with weakened or reinterpreted parameters.
TEST_F(VaultConfigTest, EditedAuthenticatedFieldsRefuseToUnlock) {
  const std::pair<const char*, std::function<void(json&)>> edits[] = {
      {"chunk_size", [](json& j) { j["chunk_size"] = 4096; }},
      {"chunk_size up", [](json& j) { j["chunk_size"] = 65536; }},
      {"log_n", [](json& j) { j["kdf"]["log_n"] = 11; }},
      {"r", [](json& j) { j["kdf"]["r"] = 4; }},
      {"p", [](json& j) { j["kdf"]["p"] = 2; }},
      {"salt", [](json& j) { j["kdf"]["salt"] = base64_encode(std::vector<std::uint8_t>(32, 9)); }},
      {"kind", [](json& j) { j["kind"] = "volume"; j["volume_size"] = 1 << 20; }},
      {"features removed", [](json& j) { j["features"].erase(j["features"].size() - 1); }},
      {"features reordered", [](json& j) { std::swap(j["features"][0], j["features"][1]); }},
      {"features duplicated", [](json& j) { j["features"].push_back(j["features"][0]); }},
      {"nonce", [](json& j) { j["encrypted_key"]["nonce"] = base64_encode(std::vector<std::uint8_t>(12, 1)); }},
      {"ciphertext", [](json& j) { j["encrypted_key"]["ciphertext"] = base64_encode(std::vector<std::uint8_t>(32, 1)); }},
      {"tag", [](json& j) { j["encrypted_key"]["tag"] = base64_encode(std::vector<std::uint8_t>(16, 1)); }},
  };
  for (const auto& [what, f] : edits) {
    SCOPED_TRACE(what);
    VaultConfig c = edited(f);
    // Allowed whatever the cost, so that the authentication itself is what refuses (a raised p
    // is refused before that by the cost check: KdfCost below).
    EXPECT_THROW(c.unlock("pw-1", KdfPolicy::AllowExpensive), WrongPassword);
  }
}

TEST_F(VaultConfigTest, VersionTwoIsReadForDirectoryVaultsOnly) {
  EXPECT_EQ(edited([](json& j) { j["version"] = 2; }).version, 2);
  try {
    edited([](json& j) {
      j["version"] = 2;
      j["kind"] = "volume";
      j["volume_size"] = 65536;
    });
    ADD_FAILURE() << "a version 2 volume accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("volumes are format 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(VaultConfig::create("pw", 4096, ScryptParams{10, 8, 1}, VaultKind::Volume, nullptr, 2), UserError);
  EXPECT_EQ(VaultConfig::create("pw", 4096, ScryptParams{10, 8, 1}, VaultKind::Directory, nullptr, 2).version, 2);
}

TEST_F(VaultConfigTest, NewerVersionsAndUnknownFeaturesAreRefusedNotGuessed) {
  for (int v : {0, 3, 99}) {
    try {
      edited([v](json& j) { j["version"] = v; });
      ADD_FAILURE() << "version " << v << " accepted";
    } catch (const CorruptData&) {
      ADD_FAILURE() << "version " << v << " reported as corrupt, not as an unsupported version";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("version"), std::string::npos) << e.what();
    }
  }
  try {
    edited([](json& j) { j["features"].push_back("time_travel"); });
    ADD_FAILURE() << "unknown feature accepted";
  } catch (const CorruptData&) {
    ADD_FAILURE() << "unknown feature reported as corrupt";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("time_travel"), std::string::npos) << e.what();
  }
}

TEST_F(VaultConfigTest, DamagedConfigsAreCorruptDataNamingTheField) {
  // (edit, a word the message must contain)
  const std::pair<std::function<void(json&)>, const char*> cases[] = {
      {[](json& j) { j.erase("chunk_size"); }, "chunk_size"},
      {[](json& j) { j.erase("kind"); }, "kind"},
      {[](json& j) { j.erase("cipher"); }, "cipher"},
      {[](json& j) { j.erase("features"); }, "features"},
      {[](json& j) { j.erase("kdf"); }, "kdf"},
      {[](json& j) { j.erase("encrypted_key"); }, "encrypted_key"},
      {[](json& j) { j["kdf"].erase("log_n"); }, "log_n"},
      {[](json& j) { j["kdf"].erase("salt"); }, "salt"},
      {[](json& j) { j["encrypted_key"].erase("tag"); }, "tag"},
      {[](json& j) { j["kdf"]["salt"] = "not base64!"; }, "salt"},
      {[](json& j) { j["kdf"]["salt"] = base64_encode(std::vector<std::uint8_t>(8, 1)); }, "salt"},
      {[](json& j) { j["encrypted_key"]["nonce"] = "AAAA"; }, "nonce"},
      {[](json& j) { j["encrypted_key"]["ciphertext"] = "Zh=="; }, "ciphertext"},
      {[](json& j) { j["encrypted_key"]["tag"] = 17; }, "tag"},
      {[](json& j) { j["chunk_size"] = 1000; }, "chunk_size"},
      {[](json& j) { j["chunk_size"] = 2 * 1024 * 1024; }, "chunk_size"},
      {[](json& j) { j["chunk_size"] = "65536"; }, "chunk_size"},
      {[](json& j) { j["chunk_size"] = 65536.5; }, "chunk_size"},
      {[](json& j) { j["kdf"]["log_n"] = 1e300; }, "log_n"},
      {[](json& j) { j["kind"] = "archive"; }, "kind"},
      {[](json& j) { j["cipher"] = "AES-128-GCM"; }, "cipher"},
      {[](json& j) { j["format"] = "gocryptfs"; }, "gpucryptfs"},
      // Fields of the wrong JSON type.
      {[](json& j) { j["kind"] = 1; }, "kind"},
      {[](json& j) { j["cipher"] = nullptr; }, "cipher"},
      {[](json& j) { j["features"] = "dir_iv"; }, "features"},
      {[](json& j) { j["features"][0] = 7; }, "features"},
      {[](json& j) { j["kdf"] = "scrypt"; }, "kdf"},
      {[](json& j) { j["kdf"]["name"] = 5; }, "name"},
      {[](json& j) { j["encrypted_key"] = json::array(); }, "encrypted_key"},
  };
  for (const auto& [f, word] : cases) {
    SCOPED_TRACE(word);
    try {
      edited(f);
      ADD_FAILURE() << "accepted";
    } catch (const CorruptData& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not CorruptData: " << e.what();
    }
  }
  // scrypt parameters below what the format allows are refused before any work is done.
  EXPECT_THROW(edited([](json& j) { j["kdf"]["log_n"] = 4; }), CorruptData);
  EXPECT_THROW(edited([](json& j) { j["kdf"]["r"] = 0; }), CorruptData);
  EXPECT_THROW(edited([](json& j) { j["kdf"]["p"] = 1000; }), CorruptData);
}

TEST_F(VaultConfigTest, NotJsonIsCorruptData) {
  for (const char* text : {"", "{", "[]", "null", "\"gpucryptfs\"", "{\"format\": \"gpucryptfs\"", "\x89PNG"}) {
    EXPECT_THROW(VaultConfig::from_json(text), CorruptData) << text;
  }
  std::string cut = config_->to_json();
  cut.resize(cut.size() / 2);
  EXPECT_THROW(VaultConfig::from_json(cut), CorruptData);
}

TEST_F(VaultConfigTest, RewrapKeepsTheMasterKeyUnderANewSaltAndNonce) {
  VaultConfig c = *config_;
  c.rewrap(master_, "new password");
  EXPECT_NE(c.salt, config_->salt);
  EXPECT_NE(c.key_nonce, config_->key_nonce);
  EXPECT_EQ(c.chunk_size, config_->chunk_size);
  EXPECT_EQ(c.scrypt.log_n, config_->scrypt.log_n);
  EXPECT_THROW(c.unlock("pw-1"), WrongPassword);
  VaultConfig back = VaultConfig::from_json(c.to_json());
  EXPECT_EQ(back.unlock("new password"), master_);
}

TEST_F(VaultConfigTest, CreateRefusesBadChunkSizes) {
  for (std::uint32_t cs : {0u, 1u, 2048u, 4095u, 4097u, 65535u, 2u * 1024 * 1024}) {
    EXPECT_THROW(VaultConfig::create("pw", cs, kCheap, VaultKind::Directory), UserError) << cs;
  }
  for (std::uint32_t cs : {4096u, 65536u, 1024u * 1024}) EXPECT_TRUE(valid_chunk_size(cs)) << cs;
}

TEST_F(VaultConfigTest, VolumeConfigCarriesItsSize) {
  SecretBytes m;
  VaultConfig v = test::version1_config("pw", 4096, kCheap, VaultKind::Volume, &m);
  v.volume_size = 123 * 4096;
  v.rewrap(m, "pw");  // the size is authenticated, so it is set before wrapping
  VaultConfig back = VaultConfig::from_json(v.to_json());
  EXPECT_EQ(back.kind, VaultKind::Volume);
  EXPECT_EQ(back.volume_size, 123u * 4096);
  EXPECT_EQ(back.unlock("pw"), m);
  json j = json::parse(v.to_json());
  j["volume_size"] = 124 * 4096;
  EXPECT_THROW(VaultConfig::from_json(j.dump()).unlock("pw"), WrongPassword);
  j.erase("volume_size");
  EXPECT_THROW(VaultConfig::from_json(j.dump()), CorruptData);
}

// The scrypt cost in a config is read before anything in it is authenticated: a cost above what
// init creates is refused before scrypt runs, unless the caller allows it.
TEST(KdfCost, WithinWhatInitCreatesIsAccepted) {
  const std::uint64_t gib = std::uint64_t{1} << 30;
  EXPECT_EQ(kdf_cost_beyond_init(ScryptParams{}, 16 * gib), "");                // the default: 128 MiB
  EXPECT_EQ(kdf_cost_beyond_init(ScryptParams{kMinScryptLogN, 8, 1}, 16 * gib), "");
  EXPECT_EQ(kdf_cost_beyond_init(ScryptParams{24, 8, 1}, 64 * gib), "");         // 16 GiB of 64: a quarter
  EXPECT_EQ(kdf_cost_beyond_init(ScryptParams{21, 8, 1}, 4 * gib), "");          // 2 GiB of 4: just half
  EXPECT_EQ(kdf_cost_beyond_init(ScryptParams{kMaxScryptLogN, 8, 1}, 1024 * gib), "");
  EXPECT_EQ(kdf_cost_beyond_init(ScryptParams{kMaxScryptLogN, 8, 1}, 0), "") << "unknown memory: no memory test";
  EXPECT_EQ(kdf_cost_beyond_init(ScryptParams{20, 1, 1}, 16 * gib), "") << "a smaller r is cheaper";
}

TEST(KdfCost, AboveWhatInitCreatesIsNamed) {
  const std::uint64_t gib = std::uint64_t{1} << 30;
  const std::string p4 = kdf_cost_beyond_init(ScryptParams{20, 8, 4}, 64 * gib);
  EXPECT_NE(p4.find("N=2^20"), std::string::npos) << p4;
  EXPECT_NE(p4.find("p=4"), std::string::npos) << p4;
  EXPECT_NE(p4.find("above the most `init` creates"), std::string::npos) << p4;
  EXPECT_NE(p4.find("2^28"), std::string::npos) << p4;
  EXPECT_NE(kdf_cost_beyond_init(ScryptParams{10, 16, 1}, 64 * gib).find("r=16"), std::string::npos);
  // Within init's range of N but more than half of the machine: 2^28 at r = 8 is 256 GiB.
  const std::string mem = kdf_cost_beyond_init(ScryptParams{28, 8, 1}, 16 * gib);
  EXPECT_NE(mem.find("256 GiB"), std::string::npos) << mem;
  EXPECT_NE(mem.find("16 GiB"), std::string::npos) << mem;
  EXPECT_NE(mem.find("more than half"), std::string::npos) << mem;
  EXPECT_NE(kdf_cost_beyond_init(ScryptParams{21, 8, 1}, 3 * gib), "") << "2 GiB of 3";
}

TEST(KdfCost, UnlockRefusesBeforeScryptUnlessAllowed) {
  // p = 2 is cheap at log N = 10, but no init ever wrote it.
  SecretBytes master;
  const VaultConfig c = test::version1_config("pw", 4096, ScryptParams{10, 8, 2}, VaultKind::Directory, &master);
  try {
    c.unlock("pw");
    FAIL() << "an expensive KDF was run without being allowed";
  } catch (const ExpensiveKdf& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("p=2"), std::string::npos) << what;
    EXPECT_NE(what.find("--allow-expensive-kdf"), std::string::npos) << what;
  }
  EXPECT_THROW(c.check_kdf_cost(KdfPolicy::RefuseAboveInit), ExpensiveKdf);
  EXPECT_THROW(c.unlock("wrong"), ExpensiveKdf) << "refused before the password is even tried";
  // A damaged-config error to the CLI (exit 23), not a wrong password.
  EXPECT_THROW(c.unlock("pw"), CorruptData);
  EXPECT_NO_THROW(c.check_kdf_cost(KdfPolicy::AllowExpensive));
  EXPECT_EQ(c.unlock("pw", KdfPolicy::AllowExpensive), master);
  EXPECT_THROW(c.unlock("wrong", KdfPolicy::AllowExpensive), WrongPassword);
}

}  // namespace
}  // namespace gcfs
