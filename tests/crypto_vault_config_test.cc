// The config file: creating and unlocking a vault, and every way an edited, damaged or newer
// config must be refused, each with the error type the CLI turns into its message.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "crypto/base64url.h"
#include "crypto/errors.h"
#include "crypto/vault_config.h"

namespace gcfs {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// log N = 10 is the smallest cost the format allows; it keeps each unlock to a few milliseconds.
const ScryptParams kCheap{10, 8, 1};

class VaultConfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    config_ = new VaultConfig(VaultConfig::create("pw-1", 16384, kCheap, VaultKind::Directory, &master_));
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
  VaultConfig c2 = VaultConfig::create("pw-1", 16384, kCheap, VaultKind::Directory, &other);
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
    EXPECT_THROW(c.unlock("pw-1"), WrongPassword);
  }
}

TEST_F(VaultConfigTest, NewerVersionsAndUnknownFeaturesAreRefusedNotGuessed) {
  for (int v : {0, 2, 99}) {
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
  VaultConfig v = VaultConfig::create("pw", 4096, kCheap, VaultKind::Volume, &m);
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

class VaultConfigFileTest : public VaultConfigTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gcfs-config-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(VaultConfigFileTest, SaveIsMode0400AndLoadsBack) {
  const std::string path = dir_ + "/" + kConfigFileName;
  const mode_t old = ::umask(0);  // the mode must not depend on the caller's umask
  config_->save_file(path);
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  VaultConfig back = VaultConfig::load_file(path);
  EXPECT_EQ(back.unlock("pw-1"), master_);
  // Nothing but the config is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(VaultConfigFileTest, SaveReplacesAtomicallyAndLeavesNoTemporary) {
  const std::string path = dir_ + "/" + kConfigFileName;
  config_->save_file(path);
  ino_t first_inode = fs::exists(path) ? [&] { struct stat st {}; ::stat(path.c_str(), &st); return st.st_ino; }() : 0;
  VaultConfig c = *config_;
  c.rewrap(master_, "changed");
  // A stale temporary from an interrupted earlier save does not block the next one.
  { std::ofstream(path + ".tmp") << "garbage"; }
  c.save_file(path);  // over the existing read-only file
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_ino, first_inode);  // a new file renamed into place, not the old one rewritten
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(VaultConfig::load_file(path).unlock("changed"), master_);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(VaultConfigFileTest, LoadErrorsNameThePath) {
  const std::string missing = dir_ + "/nothing-here.conf";
  try {
    VaultConfig::load_file(missing);
    FAIL();
  } catch (const CorruptData&) {
    FAIL() << "a missing file is not corrupt data";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  const std::string bad = dir_ + "/bad.conf";
  { std::ofstream(bad) << "{\"format\": \"gpucryptfs\", \"version\": 1}"; }
  try {
    VaultConfig::load_file(bad);
    FAIL();
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_THROW(config_->save_file(dir_ + "/no/such/dir/" + kConfigFileName), UserError);
}

}  // namespace
}  // namespace gcfs
