// A newcomer's first hour with the CLI (issue 20): passwords typed ahead into a terminal and given
// on standard input, every path and option value checked before the password prompt, and each
// exit code of the README's table, and fsck refusing a mounted vault.
// Terminals are real pseudo-terminals from script(1); every command runs under timeout(1), so a
// prompt that waits fails the test instead of hanging it.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::string bin() { return test_binary(); }

// A scratch directory with a password file "pw" (password "pw") and a vault "v" (scrypt logn 10).
class Scratch {
 public:
  Scratch() : t_("gcfs-prompt") {
    write_file(path("pw"), "pw\n");
    write_file(path("empty"), "");
    ::mkdir(path("v").c_str(), 0700);
    ::mkdir(path("mnt").c_str(), 0755);
    const auto r = run_shell(bin() + " init --scrypt-logn 10 --passfile " + q("pw") + " " + q("v"));
    if (r.status != 0) throw std::runtime_error("init failed: " + r.output);
  }
  std::string path(const std::string& name) const { return t_.path() + "/" + name; }
  std::string q(const std::string& name) const { return shell_quote(path(name)); }
  // A volume container "c.gcv" of 1 MiB.
  void make_container() {
    const auto r = run_shell(bin() + " volume create --size 1M --scrypt-logn 10 --passfile " + q("pw") + " " + q("c.gcv"));
    if (r.status != 0) throw std::runtime_error("volume create failed: " + r.output);
  }

 private:
  TempDir t_;
};

// Runs `gpucryptfs args` on a fresh pseudo-terminal (its stdin, stdout, stderr and controlling
// terminal), feeding it `typed` (empty: nothing). script -e returns the command's exit status.
CommandResult in_terminal(const std::string& args, const std::string& typed = "") {
  const std::string cmd = "timeout 20 script -qec " + shell_quote(bin() + " " + args) + " /dev/null";
  if (typed.empty()) return run_shell(cmd + " </dev/null");
  return run_shell("printf %s " + shell_quote(typed) + " | " + cmd);
}

TEST(CliPrompt, PasswordTypedAheadIntoTheTerminalIsKept) {
  GCFS_REQUIRE_PROGRAM("script");
  Scratch s;
  ::mkdir(s.path("new").c_str(), 0700);
  // Both answers are in the terminal's input queue before the first prompt: pasted, auto-typed.
  auto r = in_terminal("init --scrypt-logn 10 " + s.q("new"), "typed ahead\ntyped ahead\n");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Created a vault"), std::string::npos) << r.output;
  write_file(s.path("typed"), "typed ahead\n");
  r = run_shell(bin() + " fsck --passfile " + s.q("typed") + " " + s.q("new"));
  EXPECT_EQ(r.status, 0) << "the vault does not open with the typed-ahead password: " << r.output;
}

TEST(CliPrompt, PasswordOnStandardInputWhenItIsNoTerminal) {
  Scratch s;
  ::mkdir(s.path("new").c_str(), 0700);
  auto r = run_shell("printf 'from a pipe\\n' | " + bin() + " init --scrypt-logn 10 " + s.q("new"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Reading password from stdin"), std::string::npos) << r.output;
  // passwd reads the current password, then the new one, one line each.
  r = run_shell("printf 'from a pipe\\nsecond\\n' | " + bin() + " passwd " + s.q("new"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_shell("echo second | " + bin() + " fsck " + s.q("new"));
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_shell(bin() + " fsck " + s.q("new") + " <<< 'from a pipe'");
  EXPECT_EQ(r.status, 12) << "the old password still opens it: " << r.output;
  // Nothing on standard input is an empty password: gocryptfs's code 22.
  r = run_shell(bin() + " fsck " + s.q("new") + " </dev/null");
  EXPECT_EQ(r.status, 22) << r.output;
  EXPECT_NE(r.output.find("password is empty"), std::string::npos) << r.output;
}

// Each of these fails on a path or an option value: on a terminal, it must say so with its exit
// code without ever showing a password prompt.
TEST(CliPrompt, PathsAndOptionValuesAreCheckedBeforeThePrompt) {
  GCFS_REQUIRE_PROGRAM("script");
  Scratch s;
  s.make_container();
  ::mkdir(s.path("occupied").c_str(), 0755);
  write_file(s.path("occupied/file"), "x");
  const std::string v = s.q("v"), mnt = s.q("mnt"), c = s.q("c.gcv");
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {"init " + s.q("missing"), 6, "No such file"},
      {"init " + v, 6, "not empty"},
      {"init " + s.q("pw"), 6, "not a directory"},
      {"init --chunk-size 5000 " + s.q("missing"), 2, "--chunk-size"},
      {"init --scrypt-logn 99 " + s.q("missing"), 2, "--scrypt-logn"},
      {"mount " + s.q("missing") + " " + mnt, 6, "No such file"},
      {"mount --engine foo " + v + " " + mnt, 2, "--engine foo"},
      {"mount --gpu-streams 0 " + v + " " + mnt, 2, "--gpu-streams"},
      {"mount " + v + " " + s.q("occupied"), 10, "not empty"},
      {"mount " + v + " " + s.q("missing"), 10, "mountpoint"},
      {"mount " + c + " " + mnt, 23, "volume container: use `gpucryptfs volume mount`"},
      {"passwd " + s.q("missing"), 6, "No such file"},
      {"passwd " + s.q("mnt"), 23, "not a gpucryptfs vault"},
      {"fsck " + s.q("missing"), 6, "No such file"},
      {"fsck --engine foo " + v, 2, "--engine foo"},
      {"volume create --size 1M " + c, 6, "already exists"},
      {"volume create --size 1M " + s.q("missing/c.gcv"), 6, "does not exist"},
      {"volume create --size 1.5G " + s.q("new.gcv"), 2, "--size"},
      {"volume mount " + s.q("missing.gcv") + " " + mnt, 6, "no volume container"},
      {"volume mount " + v + " " + mnt, 23, "directory vault, not a volume container: use `gpucryptfs mount`"},
      {"volume mount --engine foo " + c + " " + mnt, 2, "--engine foo"},
      {"volume mount " + c + " " + s.q("occupied"), 10, "not empty"},
      {"volume resize --size 2M " + s.q("pw"), 23, "not a gpucryptfs volume container"},
  };
  for (const auto& [args, code, message] : cases) {
    const CommandResult r = in_terminal(args);
    EXPECT_EQ(r.status, code) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << ": should say '" << message << "':\n" << r.output;
    EXPECT_EQ(r.output.find("assword"), std::string::npos) << args << " asked for a password first:\n" << r.output;
  }
}

// The README's table, code by code (0, 1, 2, 6, 10, 12, 22, 23, 26), including a volume container
// given to each directory command.
TEST(CliPrompt, EveryExitCodeOfTheReadme) {
  Scratch s;
  s.make_container();
  const std::string pw = " --passfile " + s.q("pw") + " ", v = s.q("v"), c = s.q("c.gcv");
  EXPECT_EQ(run_shell(bin() + " info " + v).status, 0);
  EXPECT_EQ(run_shell(bin() + " fsck --passfile " + s.q("no-such-file") + " " + v).status, 1);
  EXPECT_EQ(run_shell(bin() + " fsck --no-such-option " + v).status, 2);
  EXPECT_EQ(run_shell(bin() + " info " + s.q("missing")).status, 6);
  EXPECT_EQ(run_shell(bin() + " mount" + pw + v + " " + s.q("missing")).status, 10);
  write_file(s.path("wrong"), "wrong\n");
  EXPECT_EQ(run_shell(bin() + " fsck --passfile " + s.q("wrong") + " " + v).status, 12);
  EXPECT_EQ(run_shell(bin() + " fsck --passfile " + s.q("empty") + " " + v).status, 22);
  EXPECT_EQ(run_shell(bin() + " info " + s.q("mnt")).status, 23);
  for (const auto& [cmd, hint] : std::map<std::string, std::string>{{"info", "volume info"},
                                                                    {"passwd" + pw, "volume passwd"},
                                                                    {"fsck" + pw, "volume fsck"},
                                                                    {"mount" + pw, "volume mount"}}) {
    const std::string args = cmd + " " + c + (cmd.starts_with("mount") ? " " + s.q("mnt") : "");
    const auto r = run_shell(bin() + " " + args + " </dev/null");
    EXPECT_EQ(r.status, 23) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("is a volume container: use `gpucryptfs volume"), std::string::npos) << args << "\n" << r.output;
    (void)hint;
  }
  // 26: a file with a damaged chunk (the largest ciphertext file is the one just written).
  {
    MountedVault m;
    write_file(m.path("data"), std::string(100000, 'x'));
    m.unmount();
    std::string biggest;
    std::uintmax_t size = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(m.cipherdir()))
      if (e.is_regular_file() && e.file_size() > size) size = e.file_size(), biggest = e.path();
    ASSERT_GT(size, 70000u);
    std::fstream f(biggest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x5a');
    f.close();
    const auto r = run_shell(bin() + " fsck --passfile " + shell_quote(m.passfile()) + " " + shell_quote(m.cipherdir()));
    EXPECT_EQ(r.status, 26) << r.output;
  }
}

TEST(CliPrompt, FsckRefusesAMountedVaultAndRepairAlways) {
  MountedVault m;
  write_file(m.path("a"), "hello");
  const std::string fsck = bin() + " fsck --passfile " + shell_quote(m.passfile()) + " ";
  auto r = run_shell(fsck + shell_quote(m.cipherdir()));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is mounted on " + m.mountpoint()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
  r = run_shell(fsck + "--force " + shell_quote(m.cipherdir() + "/"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("checking anyway"), std::string::npos) << r.output;
  r = run_shell(fsck + "--repair --force " + shell_quote(m.cipherdir()));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--repair would race"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(m.cipherdir() + "/gpucryptfs.lost+found"));
  m.unmount();
  r = run_shell(fsck + "--repair " + shell_quote(m.cipherdir()));
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
}  // namespace gcfs::test
