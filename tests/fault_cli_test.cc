// The gpucryptfs binary against bad input: wrong password, empty password file, a config with an
// unknown version, edited fields or a flipped bit. Each gives a clear message and its documented
// exit code, and writes nothing (the CIPHERDIR tree is compared before and after). Also fsck's
// command line: exit status, what it prints, and --repair.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <regex>

#include "crypto/errors.h"
#include "fs/fsck/vault_check.h"
#include "mount/cli/byte_size.h"
#include "mount/cli/commands.h"
#include "mount/cli/process_hardening.h"
#include "tests/fault_support.h"
#include "tests/support/mounted_vault.h"

namespace gcfs {
namespace {

using testing::TempDir;
using testing::TestVault;

using Result = test::CommandResult;

// The gpucryptfs binary with args, stdin closed so no password prompt can wait for a terminal.
Result run(const std::string& args) { return test::run_shell(std::string(GPUCRYPTFS_BIN) + " " + args + " </dev/null"); }

class FaultCli : public ::testing::Test {
 protected:
  FaultCli() : v(tmp / "cipher") {
    std::filesystem::create_directories(tmp / "mnt");
    write_text(tmp / "pw", std::string(TestVault::kPassword) + "\n");
    write_text(tmp / "wrong", "not the password\n");
    write_text(tmp / "empty", "");
    v.mkdir("/docs");
    v.write_file("/docs/report", testing::pattern_bytes(3 * TestVault::kChunk + 9, 1));
  }
  static void write_text(const std::string& path, const std::string& s) {
    testing::write_all(path, std::vector<std::uint8_t>(s.begin(), s.end()));
  }
  std::string config() const { return v.dir() + "/" + kConfigFileName; }
  std::string config_text() const {
    auto b = testing::read_all(config());
    return std::string(b.begin(), b.end());
  }
  // Runs args and checks: exit status, a message matching `message`, and nothing written to
  // CIPHERDIR or the mountpoint.
  void expect_refused(const std::string& args, int status, const std::string& message) {
    const auto before = testing::snapshot(v.dir());
    const auto mnt_before = testing::snapshot(tmp / "mnt");
    const Result r = run(args);
    EXPECT_EQ(r.status, status) << args << "\n" << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex(message, std::regex::icase)))
        << args << ": message should match '" << message << "', got:\n" << r.output;
    EXPECT_EQ(testing::snapshot(v.dir()), before) << args << " changed CIPHERDIR";
    EXPECT_EQ(testing::snapshot(tmp / "mnt"), mnt_before) << args << " wrote into the mountpoint";
    std::error_code ec;
    EXPECT_FALSE(std::filesystem::exists(v.dir() + "/" + kLostFoundDirName, ec));
  }
  // Every command that unlocks a vault, with the given password file.
  std::vector<std::string> unlocking_commands(const std::string& passfile) {
    return {"fsck --passfile " + passfile + " " + v.dir(),
            "fsck --repair --passfile " + passfile + " " + v.dir(),
            "mount --passfile " + passfile + " " + v.dir() + " " + (tmp / "mnt"),
            "passwd --passfile " + passfile + " --new-passfile " + (tmp / "pw") + " " + v.dir()};
  }

  TempDir tmp;
  TestVault v;
};

TEST_F(FaultCli, WrongPasswordWritesNothing) {
  for (const auto& cmd : unlocking_commands(tmp / "wrong"))
    expect_refused(cmd, cli::kExitWrongPassword, "wrong password");
}

TEST_F(FaultCli, EmptyPasswordFileWritesNothing) {
  for (const auto& cmd : unlocking_commands(tmp / "empty"))
    expect_refused(cmd, cli::kExitEmptyPassword, "password is empty");
}

TEST_F(FaultCli, MissingPasswordFileWritesNothing) {
  for (const auto& cmd : unlocking_commands(tmp / "no-such-file"))
    expect_refused(cmd, cli::kExitError, "cannot read the password file");
}

TEST_F(FaultCli, UnknownConfigVersionIsRefused) {
  std::string text = config_text();
  // A version this gpucryptfs does not know (it reads 1 and 2).
  text = std::regex_replace(text, std::regex("\"version\": [0-9]+"), "\"version\": 3");
  write_text(config(), text);
  for (const auto& cmd : unlocking_commands(tmp / "pw")) expect_refused(cmd, cli::kExitError, "version 3");
}

TEST_F(FaultCli, UnknownFeatureIsRefused) {
  std::string text = config_text();
  text = std::regex_replace(text, std::regex("\"holes\""), "\"holes\", \"time-travel\"");
  write_text(config(), text);
  for (const auto& cmd : unlocking_commands(tmp / "pw")) expect_refused(cmd, cli::kExitError, "time-travel");
}

TEST_F(FaultCli, EditedFieldFailsLikeAWrongPassword) {
  // A weaker scrypt cost and a different chunk size: both are authenticated with the key.
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"log_n\": 10", "\"log_n\": 11"},
                                 {"\"chunk_size\": 4096", "\"chunk_size\": 8192"}}) {
    const std::string original = config_text();
    ASSERT_NE(original.find(from), std::string::npos) << original;
    write_text(config(), std::regex_replace(original, std::regex(from), to));
    for (const auto& cmd : unlocking_commands(tmp / "pw"))
      expect_refused(cmd, cli::kExitWrongPassword, "fields were edited");
    write_text(config(), original);
  }
}

TEST_F(FaultCli, FlippedBitInTheConfig) {
  // Inside the base64 of the wrapped key: the wrap fails to open.
  std::string text = config_text();
  const auto pos = text.find("\"ciphertext\": \"") + 20;
  text[pos] = text[pos] == 'A' ? 'B' : 'A';
  write_text(config(), text);
  for (const auto& cmd : unlocking_commands(tmp / "pw")) expect_refused(cmd, cli::kExitWrongPassword, "wrong password");
  // And one that breaks the JSON itself.
  text = config_text();
  text[text.find('{')] = '[';
  write_text(config(), text);
  for (const auto& cmd : unlocking_commands(tmp / "pw")) expect_refused(cmd, cli::kExitBadConfig, "not valid JSON");
}

TEST_F(FaultCli, NotAVault) {
  std::filesystem::remove(config());
  for (const auto& cmd : unlocking_commands(tmp / "pw")) expect_refused(cmd, cli::kExitBadConfig, "not a gpucryptfs vault");
}

TEST_F(FaultCli, FsckExitStatusOutputAndRepair) {
  Result r = run("fsck --passfile " + (tmp / "pw") + " " + v.dir());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no problems"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fsck: 100%"), std::string::npos) << "no progress on stderr:\n" << r.output;

  // One damaged chunk and one file whose header is gone.
  v.write_file("/docs/lost", testing::pattern_bytes(100, 2));
  testing::flip_bit(v.cipher_path("/docs/report"), v.data_offset(2, 3 * TestVault::kChunk + 9) + 38);
  testing::flip_bit(v.cipher_path("/docs/lost"), 2);
  const auto before = testing::snapshot(v.dir());
  r = run("fsck --passfile " + (tmp / "pw") + " " + v.dir());
  EXPECT_EQ(r.status, cli::kExitFsckProblems) << r.output;
  EXPECT_NE(r.output.find("plaintext:  /docs/report"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(v.cipher_path("/docs/report")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chunk 2 of 4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("plaintext:  /docs/lost"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--repair"), std::string::npos) << r.output;
  EXPECT_EQ(testing::snapshot(v.dir()), before) << "fsck without --repair changed the vault";

  r = run("fsck --repair --passfile " + (tmp / "pw") + " " + v.dir());
  EXPECT_EQ(r.status, cli::kExitFsckProblems) << r.output;
  EXPECT_NE(r.output.find("moved to:"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(v.cipher_path("/docs/lost")));
  EXPECT_TRUE(std::filesystem::exists(v.cipher_path("/docs/report")));
  EXPECT_TRUE(std::filesystem::is_directory(v.dir() + "/" + kLostFoundDirName));

  // What is left is the file with a damaged chunk, which --repair leaves in place.
  r = run("fsck --passfile " + (tmp / "pw") + " " + v.dir());
  EXPECT_EQ(r.status, cli::kExitFsckProblems) << r.output;
  EXPECT_EQ(r.output.find("/docs/lost"), std::string::npos) << r.output;
  // With nothing left to move, --repair does not claim to have moved anything.
  r = run("fsck --repair --passfile " + (tmp / "pw") + " " + v.dir());
  EXPECT_EQ(r.status, cli::kExitFsckProblems) << r.output;
  EXPECT_EQ(r.output.find("moved 0"), std::string::npos) << r.output;
}

// A planted link where lost+found belongs: reported, --repair moves nothing, and says so.
TEST_F(FaultCli, FsckRepairRefusesALostFoundLink) {
  std::filesystem::create_directories(tmp / "outside");
  std::filesystem::create_directory_symlink(tmp / "outside", v.dir() + "/" + kLostFoundDirName);
  testing::write_all(v.dir() + "/planted", {'x'});
  const Result r = run("fsck --repair --passfile " + (tmp / "pw") + " " + v.dir());
  EXPECT_EQ(r.status, cli::kExitFsckProblems) << r.output;
  EXPECT_NE(r.output.find("--repair moved nothing"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("symbolic link"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(tmp / "outside"));
  EXPECT_TRUE(std::filesystem::exists(v.dir() + "/planted"));
}

TEST_F(FaultCli, FsckUsageErrors) {
  EXPECT_EQ(run("fsck").status, cli::kExitUsage);
  EXPECT_EQ(run("fsck --no-such-option " + v.dir()).status, cli::kExitUsage);
  EXPECT_EQ(run("fsck --help").status, 0);
}

TEST(ProcessHardening, NoCoreDumpsAndNoSameUserDebugging) {
  // In a child, so this test process keeps its own settings.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!cli::harden_process()) ::_exit(10);
    if (::prctl(PR_GET_DUMPABLE) != 0) ::_exit(11);
    rlimit core{};
    if (::getrlimit(RLIMIT_CORE, &core) != 0 || core.rlim_cur != 0) ::_exit(12);
    // It survives the fork that detaches the daemon.
    pid_t grandchild = ::fork();
    if (grandchild == 0) ::_exit(::prctl(PR_GET_DUMPABLE) == 0 ? 0 : 13);
    int st = 0;
    ::waitpid(grandchild, &st, 0);
    ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 14);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10: harden_process failed, 11: still dumpable, 12: core limit not 0, 13: lost on fork";
}

TEST_F(FaultCli, PasswordFileWithCrLfAndNoNewline) {
  write_text(tmp / "crlf", std::string(TestVault::kPassword) + "\r\nsecond line\n");
  EXPECT_EQ(run("fsck --passfile " + (tmp / "crlf") + " " + v.dir()).status, 0);
  write_text(tmp / "bare", TestVault::kPassword);
  EXPECT_EQ(run("fsck --passfile " + (tmp / "bare") + " " + v.dir()).status, 0);
  expect_refused("fsck --passfile " + tmp.path() + " " + v.dir(), cli::kExitError, "cannot read the password file");
}

// Sizes on the command line (volume --size, bench): binary units, and a clear refusal of what
// would otherwise be silently misread, a fraction above all.
TEST(ByteSize, ParsesBinaryUnitsAndRefusesFractionsAndUnknownUnits) {
  EXPECT_EQ(cli::parse_byte_size("4096"), 4096u);
  EXPECT_EQ(cli::parse_byte_size("512K"), 512u << 10);
  EXPECT_EQ(cli::parse_byte_size("64MiB"), 64u << 20);
  EXPECT_EQ(cli::parse_byte_size("10g"), 10ull << 30);
  auto refusal = [](const std::string& text) {
    try {
      cli::parse_byte_size(text);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal("1.5G").find("not a whole number"), std::string::npos) << refusal("1.5G");
  EXPECT_NE(refusal("12X").find("unknown unit"), std::string::npos) << refusal("12X");
  EXPECT_NE(refusal("G").find("not a size"), std::string::npos) << refusal("G");
  EXPECT_NE(refusal("99999999999T").find("too large"), std::string::npos) << refusal("99999999999T");
}

}  // namespace
}  // namespace gcfs
