// gpucryptfs.conf as a file: saved atomically with mode 0400 beneath CIPHERDIR's descriptor, and
// read back only when it is a regular file of a config's size. Every other shape a hostile or
// damaged CIPHERDIR can hold in its place (FIFO, socket, directory, device node, symbolic links to
// inside and outside, an empty file, a huge sparse file) must be answered at once with what it is,
// and nothing outside CIPHERDIR may be read or written through it.
#include "fs/config_file.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>

#include <gtest/gtest.h>

#include "crypto/errors.h"
#include "fs/vault.h"
#include "tests/support/unix_socket.h"

namespace gcfs {
namespace {

namespace fs = std::filesystem;

const ScryptParams kCheap{10, 8, 1};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ConfigFileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    config_ = new VaultConfig(VaultConfig::create("pw-1", 16384, kCheap, VaultKind::Directory, &master_));
  }
  static void TearDownTestSuite() {
    delete config_;
    config_ = nullptr;
  }
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("gcfs-config-file-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_ / "vault");
    fs::create_directories(base_ / "outside");
    dir_ = (base_ / "vault").string();
    conf_ = dir_ + "/" + kConfigFileName;
    // A canary outside CIPHERDIR: a valid config of another vault, which nothing may read or change.
    canary_ = (base_ / "outside" / "other.conf").string();
    std::ofstream(canary_) << config_->to_json();
    canary_text_ = slurp(canary_);
  }
  void TearDown() override {
    EXPECT_EQ(slurp(canary_), canary_text_) << "the file outside CIPHERDIR changed";
    fs::remove_all(base_);
  }

  // Runs f with a deadline: a hang is the failure this file exists to catch.
  template <typename F>
  static auto quickly(const char* what, F f) {
    auto fut = std::async(std::launch::async, f);
    if (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << what << " blocked or took more than 5 s";
      std::abort();  // the thread cannot be cancelled; better a clear crash than a stuck test
    }
    return fut.get();
  }

  // The message of read_config_file's CorruptData, or a failure when it throws anything else.
  std::string corrupt_message() {
    return quickly("read_config_file", [&]() -> std::string {
      try {
        read_config_file(dir_);
        ADD_FAILURE() << "accepted";
      } catch (const CorruptData& e) {
        return e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not CorruptData: " << e.what();
      }
      return "";
    });
  }

  static VaultConfig* config_;
  static SecretBytes master_;
  fs::path base_;
  std::string dir_, conf_, canary_, canary_text_;
};
VaultConfig* ConfigFileTest::config_ = nullptr;
SecretBytes ConfigFileTest::master_;

TEST_F(ConfigFileTest, SaveIsMode0400AndLoadsBack) {
  const mode_t old = ::umask(0377);  // the mode must not depend on the caller's umask
  write_config_file(dir_, *config_);
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::lstat(conf_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(read_config_file(dir_).unlock("pw-1"), master_);
  // Nothing but the config is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(ConfigFileTest, SaveReplacesAtomicallyAndLeavesNoTemporary) {
  write_config_file(dir_, *config_);
  struct stat first {};
  ASSERT_EQ(::stat(conf_.c_str(), &first), 0);
  VaultConfig c = *config_;
  c.rewrap(master_, "changed");
  // A stale temporary from an interrupted earlier save does not block the next one.
  { std::ofstream(conf_ + ".tmp") << "garbage"; }
  write_config_file(dir_, c);  // over the existing read-only file
  struct stat st {};
  ASSERT_EQ(::stat(conf_.c_str(), &st), 0);
  EXPECT_NE(st.st_ino, first.st_ino);  // a new file renamed into place, not the old one rewritten
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(read_config_file(dir_).unlock("changed"), master_);
  EXPECT_FALSE(fs::exists(conf_ + ".tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(ConfigFileTest, SaveNeverWritesThroughALinkOrBlocksOnAFifo) {
  // A link planted as the temporary and one as the config itself, both to the canary outside.
  fs::create_symlink(canary_, conf_ + ".tmp");
  fs::create_symlink(canary_, conf_);
  quickly("write_config_file", [&] { write_config_file(dir_, *config_); });
  struct stat st {};
  ASSERT_EQ(::lstat(conf_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link was replaced by the config, not written through";
  EXPECT_EQ(read_config_file(dir_).unlock("pw-1"), master_);
  EXPECT_FALSE(fs::exists(fs::symlink_status(conf_ + ".tmp")));
  // A FIFO as the temporary: removed, never opened.
  ASSERT_EQ(::mkfifo((conf_ + ".tmp").c_str(), 0600), 0);
  quickly("write_config_file", [&] { write_config_file(dir_, *config_); });
  EXPECT_EQ(read_config_file(dir_).unlock("pw-1"), master_);
  // A directory as the temporary cannot be removed: a clear error, and the config is intact.
  fs::create_directory(conf_ + ".tmp");
  EXPECT_THROW(quickly("write_config_file", [&] { write_config_file(dir_, *config_); }), UserError);
  EXPECT_EQ(read_config_file(dir_).unlock("pw-1"), master_);
  EXPECT_THROW(write_config_file(dir_ + "/no/such/dir", *config_), UserError);
}

TEST_F(ConfigFileTest, MissingConfigOrCipherdirIsNotAVault) {
  EXPECT_THROW(read_config_file(dir_), NotAVault);
  EXPECT_THROW(read_config_file(dir_ + "/no-such-dir"), NotAVault);
  std::ofstream(dir_ + "/plain-file") << "x";
  EXPECT_THROW(read_config_file(dir_ + "/plain-file"), NotAVault);
  // A FIFO named as CIPHERDIR: O_DIRECTORY answers before anything could block.
  ASSERT_EQ(::mkfifo((dir_ + "/fifo-dir").c_str(), 0600), 0);
  EXPECT_THROW(quickly("read_config_file", [&] { return read_config_file(dir_ + "/fifo-dir"); }), NotAVault);
  try {
    read_config_file(dir_);
  } catch (const NotAVault& e) {
    EXPECT_NE(std::string(e.what()).find("gpucryptfs init"), std::string::npos) << e.what();
  }
}

TEST_F(ConfigFileTest, DamagedContentIsCorruptDataNamingThePath) {
  std::ofstream(conf_) << "{\"format\": \"gpucryptfs\", \"version\": 1}";
  const std::string m = corrupt_message();
  EXPECT_NE(m.find(conf_), std::string::npos) << m;
}

TEST_F(ConfigFileTest, FifoSocketDirectoryAndDeviceAreReportedAtOnce) {
  ASSERT_EQ(::mkfifo(conf_.c_str(), 0600), 0);
  EXPECT_NE(corrupt_message().find("is a FIFO"), std::string::npos);
  fs::remove(conf_);

  ASSERT_TRUE(test::make_socket(dir_, kConfigFileName));
  EXPECT_NE(corrupt_message().find("is a socket"), std::string::npos);
  fs::remove(conf_);

  fs::create_directory(conf_);
  EXPECT_NE(corrupt_message().find("is a directory"), std::string::npos);
  fs::remove(conf_);

  // A device node: a terminal's open could block or change its state; never opened.
  if (::mknod(conf_.c_str(), S_IFCHR | 0600, makedev(5, 0)) == 0) {  // /dev/tty's numbers
    EXPECT_NE(corrupt_message().find("is a character device"), std::string::npos);
    fs::remove(conf_);
  }
}

TEST_F(ConfigFileTest, SymlinksInsideAndOutsideAreDamageNeverFollowed) {
  // Outside: a valid config of another vault. Read through the link, it would open that vault.
  fs::create_symlink(canary_, conf_);
  std::string m = corrupt_message();
  EXPECT_NE(m.find("symbolic link"), std::string::npos) << m;
  EXPECT_NE(m.find(conf_), std::string::npos) << m;
  fs::remove(conf_);
  // Inside CIPHERDIR too: a link anywhere is not what init writes.
  std::ofstream(dir_ + "/real.conf") << config_->to_json();
  fs::create_symlink("real.conf", conf_);
  EXPECT_NE(corrupt_message().find("symbolic link"), std::string::npos);
  fs::remove(conf_);
  // A dangling link is a link too, not a missing config.
  fs::create_symlink(dir_ + "/nowhere", conf_);
  EXPECT_NE(corrupt_message().find("symbolic link"), std::string::npos);
}

TEST_F(ConfigFileTest, EmptyAndHugeSparseFilesAreRefusedWithoutReadingThem) {
  { std::ofstream empty(conf_); }
  EXPECT_NE(corrupt_message().find("not valid JSON"), std::string::npos);
  // 2 GiB of holes: read whole, this took seconds and gigabytes before the parser said no.
  {
    int fd = ::open(conf_.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{2} << 30), 0);
    ::close(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = corrupt_message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_NE(m.find("larger than any config"), std::string::npos) << m;
  // The largest a config may be is still read: the cap is not a limit on real configs.
  std::string padded = config_->to_json();
  padded.append(kMaxConfigFileBytes - padded.size(), ' ');
  { std::ofstream(conf_, std::ios::trunc) << padded; }
  EXPECT_EQ(read_config_file(dir_).unlock("pw-1"), master_);
  { std::ofstream(conf_, std::ios::app) << ' '; }
  EXPECT_NE(corrupt_message().find("larger than any config"), std::string::npos);
}

TEST_F(ConfigFileTest, VaultCreateAndLoadConfigGoThroughTheSameChecks) {
  Vault::create(dir_, "pw-2", 4096, kCheap);
  EXPECT_EQ(Vault::load_config(dir_).chunk_size, 4096u);
  struct stat st {};
  ASSERT_EQ(::lstat(conf_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  fs::remove(conf_);
  ASSERT_EQ(::mkfifo(conf_.c_str(), 0600), 0);
  EXPECT_THROW(quickly("load_config", [&] { return Vault::load_config(dir_); }), CorruptData);
}

}  // namespace
}  // namespace gcfs
