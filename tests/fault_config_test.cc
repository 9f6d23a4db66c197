// Issue 18 through the gpucryptfs binary: gpucryptfs.conf replaced by every shape a hostile or
// damaged CIPHERDIR can hold (FIFO, socket, directory, device node, symbolic links to inside and
// outside, an empty file, a huge sparse file), and configs asking for a scrypt cost above what
// init creates. mount, info, passwd and fsck each answer at once (under a deadline: a hang fails,
// it does not stall the suite) with one line naming the problem and exit code 23, write nothing
// to CIPHERDIR, and touch nothing outside it.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>

#include "mount/cli/commands.h"
#include "tests/fault_support.h"
#include "tests/support/mounted_vault.h"
#include "tests/support/unix_socket.h"

namespace gcfs {
namespace {

using testing::TempDir;
using testing::TestVault;
using Result = test::CommandResult;
namespace fsys = std::filesystem;

// Every command is bounded: `timeout` ends a hang with 124, which no assertion below accepts.
constexpr int kDeadlineSeconds = 20;
constexpr auto kQuick = std::chrono::seconds(5);

struct Timed {
  Result r;
  std::chrono::steady_clock::duration took;
};

Timed run(const std::string& args) {
  const auto t0 = std::chrono::steady_clock::now();
  Result r = test::run_shell("timeout -k 5 " + std::to_string(kDeadlineSeconds) + " " + test::test_binary() + " " + args +
                             " </dev/null");
  return {r, std::chrono::steady_clock::now() - t0};
}

// testing::snapshot, but a large file is recorded by inode, size and mtime instead of being read:
// the huge sparse config is 2 GiB.
std::map<std::string, std::string> snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto it = fsys::recursive_directory_iterator(root); it != fsys::recursive_directory_iterator(); ++it) {
    const std::string p = it->path().string();
    struct stat st {};
    ::lstat(p.c_str(), &st);
    std::string rec = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_ino) +
                      " " + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " ";
    if (S_ISREG(st.st_mode) && st.st_size < (1 << 20)) rec += test::read_file(p);
    if (S_ISLNK(st.st_mode)) rec += fsys::read_symlink(it->path()).string();
    out[p.substr(root.size())] = rec;
  }
  return out;
}

bool is_mounted(const std::string& path) {
  return test::read_file("/proc/self/mounts").find(" " + path + " ") != std::string::npos;
}

class FaultConfig : public ::testing::Test {
 protected:
  FaultConfig() : v(tmp / "cipher") {
    fsys::create_directories(tmp / "mnt");
    fsys::create_directories(tmp / "outside");
    test::write_file(tmp / "pw", std::string(TestVault::kPassword) + "\n");
    test::write_file(tmp / "new-pw", "a new password\n");
    v.mkdir("/docs");
    v.write_file("/docs/report", testing::pattern_bytes(2 * TestVault::kChunk + 9, 1));
    // A canary outside CIPHERDIR: another vault's config, as a link planted in CIPHERDIR would
    // point to. Its bytes must never change, and it must never be read as this vault's config.
    config_text_ = test::read_file(config());
    test::write_file(canary(), config_text_);
  }
  std::string config() const { return v.dir() + "/" + kConfigFileName; }
  std::string canary() const { return tmp / "outside/other.conf"; }
  std::string mnt() const { return tmp / "mnt"; }

  // Every command that reads the config, with a password that would open it.
  std::vector<std::string> commands(const std::string& extra = "") const {
    const std::string pw = " --passfile " + (tmp / "pw") + " ";
    return {"mount" + pw + extra + " " + v.dir() + " " + mnt(),
            "info " + v.dir(),
            "passwd" + pw + "--new-passfile " + (tmp / "new-pw") + " " + extra + " " + v.dir(),
            "fsck" + pw + extra + " " + v.dir()};
  }

  // Runs args and checks: done within kQuick, exit status, one line matching `message`, nothing
  // written to CIPHERDIR, the mountpoint or the canary, nothing mounted.
  void expect_refused_at_once(const std::string& args, int status, const std::string& message) {
    const auto before = snapshot(v.dir());
    const Timed t = run(args);
    EXPECT_LT(t.took, kQuick) << args << ": took "
                              << std::chrono::duration_cast<std::chrono::milliseconds>(t.took).count() << " ms";
    EXPECT_EQ(t.r.status, status) << args << "\n" << t.r.output;
    EXPECT_TRUE(std::regex_search(t.r.output, std::regex(message, std::regex::icase)))
        << args << ": message should match '" << message << "', got:\n" << t.r.output;
    EXPECT_EQ(std::count(t.r.output.begin(), t.r.output.end(), '\n'), 1) << t.r.output;
    EXPECT_EQ(snapshot(v.dir()), before) << args << " changed CIPHERDIR";
    EXPECT_TRUE(fsys::is_empty(mnt())) << args << " wrote into the mountpoint";
    EXPECT_FALSE(is_mounted(mnt())) << args;
    if (is_mounted(mnt())) test::run_shell(test::MountedVault::unmount_command(true) + test::shell_quote(mnt()));
    EXPECT_EQ(test::read_file(canary()), config_text_) << args << " changed the file outside CIPHERDIR";
  }
  // The shape in place of gpucryptfs.conf, for every command.
  void expect_every_command_refuses(const std::string& message, int status = cli::kExitBadConfig) {
    for (const auto& cmd : commands()) expect_refused_at_once(cmd, status, message);
  }

  TempDir tmp;
  TestVault v;
  std::string config_text_;
};

TEST_F(FaultConfig, FifoAsConfig) {
  fsys::remove(config());
  ASSERT_EQ(::mkfifo(config().c_str(), 0600), 0);
  expect_every_command_refuses("gpucryptfs.conf is a FIFO, not a config file");
}

TEST_F(FaultConfig, SocketAsConfig) {
  fsys::remove(config());
  ASSERT_TRUE(test::make_socket(v.dir(), kConfigFileName));
  expect_every_command_refuses("gpucryptfs.conf is a socket");
}

TEST_F(FaultConfig, DirectoryAsConfig) {
  fsys::remove(config());
  fsys::create_directory(config());
  expect_every_command_refuses("gpucryptfs.conf is a directory");
}

TEST_F(FaultConfig, DeviceNodeAsConfig) {
  fsys::remove(config());
  if (::mknod(config().c_str(), S_IFCHR | 0600, makedev(5, 0)) != 0) GTEST_SKIP() << "mknod needs root";
  expect_every_command_refuses("gpucryptfs.conf is a character device");
}

// A link to another vault's config outside CIPHERDIR: followed, it would unlock that vault with
// this password. A link is damage wherever it points.
TEST_F(FaultConfig, SymlinkOutsideAsConfig) {
  fsys::remove(config());
  fsys::create_symlink(canary(), config());
  expect_every_command_refuses("gpucryptfs.conf is a symbolic link");
}

TEST_F(FaultConfig, SymlinkInsideAsConfig) {
  fsys::rename(config(), v.dir() + "/real.conf");
  fsys::create_symlink("real.conf", config());
  expect_every_command_refuses("symbolic link: the config is never read through a link");
}

TEST_F(FaultConfig, EmptyConfig) {
  testing::write_all(config(), {});
  expect_every_command_refuses("not valid JSON");
}

// 2 GiB of holes: read whole, this took 13.6 s and 4.2 GB before the parser refused it.
TEST_F(FaultConfig, HugeSparseConfig) {
  ::chmod(config().c_str(), 0600);
  ASSERT_EQ(::truncate(config().c_str(), off_t{2} << 30), 0);
  expect_every_command_refuses("2147483648 bytes, larger than any config");
}

// Finding 6: the scrypt cost is read before anything is authenticated. log N = 20 with p = 4 took
// 22 s and 1 GiB before "wrong password"; now it is refused at once with the cost named.
TEST_F(FaultConfig, ForgedExpensiveKdfIsRefusedAtOnceWithTheCostNamed) {
  std::string text = config_text_;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"log_n\": 10", "\"log_n\": 20"},
                                 {"\"p\": 1", "\"p\": 4"}}) {
    ASSERT_NE(text.find(from), std::string::npos) << text;
    text = std::regex_replace(text, std::regex(from), to);
  }
  testing::write_all(config(), std::vector<std::uint8_t>(text.begin(), text.end()));
  for (const auto& cmd : commands()) {
    if (cmd.starts_with("info")) continue;
    expect_refused_at_once(cmd, cli::kExitBadConfig, "scrypt N=2\\^20, r=8, p=4, above the most `init` creates.*--allow-expensive-kdf");
  }
  // info needs no password: it shows the parameters and says what unlocking will refuse.
  const Timed info = run("info " + v.dir());
  EXPECT_EQ(info.r.status, 0) << info.r.output;
  EXPECT_NE(info.r.output.find("Warning:      key slot 0: scrypt N=2^20, r=8, p=4"), std::string::npos) << info.r.output;
}

// A cost above init's made on purpose (here p = 2, cheap at log N = 10) opens with the option,
// for every command that unlocks, and passwd keeps it.
TEST_F(FaultConfig, ExpensiveKdfMadeOnPurposeOpensWithTheOption) {
  const std::string dir = tmp / "costly";
  fsys::create_directories(dir);
  Vault::create(dir, TestVault::kPassword, TestVault::kChunk, ScryptParams{10, 8, 2});
  const std::string pw = " --passfile " + (tmp / "pw") + " ";
  const Timed refused = run("fsck" + pw + dir);
  EXPECT_EQ(refused.r.status, cli::kExitBadConfig) << refused.r.output;
  EXPECT_NE(refused.r.output.find("p=2"), std::string::npos) << refused.r.output;
  const Timed fsck = run("fsck --allow-expensive-kdf" + pw + dir);
  EXPECT_EQ(fsck.r.status, 0) << fsck.r.output;
  const Timed passwd = run("passwd --allow-expensive-kdf" + pw + "--new-passfile " + (tmp / "new-pw") + " " + dir);
  ASSERT_EQ(passwd.r.status, 0) << passwd.r.output;
  const Timed again = run("fsck --allow-expensive-kdf --passfile " + (tmp / "new-pw") + " " + dir);
  EXPECT_EQ(again.r.status, 0) << again.r.output;
  EXPECT_EQ(Vault::load_config(dir).slots.at(0).scrypt.p, 2) << "passwd keeps the slot's cost";

  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "mount needs root and /dev/fuse";
  const Timed m = run("mount --engine cpu --allow-expensive-kdf --passfile " + (tmp / "new-pw") + " " + dir + " " + mnt());
  ASSERT_EQ(m.r.status, 0) << m.r.output;
  EXPECT_TRUE(is_mounted(mnt()));
  const Result u = test::run_shell(test::MountedVault::unmount_command(false) + test::shell_quote(mnt()));
  EXPECT_EQ(u.status, 0) << u.output;
}

// Writing: passwd replaces the config through CIPHERDIR's descriptor; a link or FIFO planted as
// its temporary is neither written through nor blocked on.
TEST_F(FaultConfig, PasswdNeverWritesThroughAPlantedTemporary) {
  fsys::create_symlink(canary(), config() + ".tmp");
  const Timed t = run("passwd --passfile " + (tmp / "pw") + " --new-passfile " + (tmp / "new-pw") + " " + v.dir());
  ASSERT_EQ(t.r.status, 0) << t.r.output;
  EXPECT_EQ(test::read_file(canary()), config_text_);
  EXPECT_FALSE(fsys::exists(fsys::symlink_status(config() + ".tmp")));
  ASSERT_EQ(::mkfifo((config() + ".tmp").c_str(), 0600), 0);
  const Timed back = run("passwd --passfile " + (tmp / "new-pw") + " --new-passfile " + (tmp / "pw") + " " + v.dir());
  EXPECT_LT(back.took, kQuick);
  ASSERT_EQ(back.r.status, 0) << back.r.output;
  const Timed fsck = run("fsck --passfile " + (tmp / "pw") + " " + v.dir());
  EXPECT_EQ(fsck.r.status, 0) << fsck.r.output;
}

}  // namespace
}  // namespace gcfs
