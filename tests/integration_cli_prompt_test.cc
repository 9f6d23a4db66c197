// A newcomer's first hour with the CLI (issue 20): passwords typed ahead into a terminal and given
// on standard input, every path and option value checked before the password prompt, each exit
// code of the README's table, fsck refusing a mounted vault, size suffixes, --gpus, the GPU
// message, help text wrapped between words, and README's usage block against each --help.
// Terminals are real pseudo-terminals from script(1); every command runs under timeout(1), so a
// prompt that waits fails the test instead of hanging it.
#include <dlfcn.h>
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
      {"mount --gpus 7 " + v + " " + mnt, 2, "no GPU 7"},
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
      {"volume mount --gpus 7 " + c + " " + mnt, 2, "no GPU 7"},
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

// The README's table, code by code (0, 1, 2, 6, 10, 12, 14, 22, 23, 26, 31), including a volume container
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
  EXPECT_EQ(run_shell("echo 0123-not-a-key | " + bin() + " mount --masterkey " + v + " " + s.q("mnt")).status, 14);
  EXPECT_EQ(run_shell(bin() + " info " + s.q("mnt")).status, 23);
  for (const auto& [cmd, hint] : std::map<std::string, std::string>{{"info", "volume info"},
                                                                    {"passwd" + pw, "volume passwd"},
                                                                    {"fsck" + pw, "volume fsck"},
                                                                    {"mount" + pw, "volume mount"}}) {
    const std::string args = cmd + " " + c + (cmd.starts_with("mount") ? " " + s.q("mnt") : "");
    const auto r = run_shell(bin() + " " + args + " </dev/null");
    EXPECT_EQ(r.status, 23) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("is a volume container: use `gpucryptfs " + hint + "`"), std::string::npos)
        << args << "\n" << r.output;
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
  // 31: a second read-write mount of a mounted vault.
  {
    MountedVault m;
    const auto r = run_shell(bin() + " mount --passfile " + shell_quote(m.passfile()) + " " + shell_quote(m.cipherdir()) +
                             " " + s.q("mnt"));
    EXPECT_EQ(r.status, 31) << r.output;
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

// Volumes have info (no password), passwd (both header copies) and fsck (every header copy and
// chunk authenticated, holes skipped, exit codes as the directory fsck's).
TEST(CliPrompt, VolumeInfoPasswdAndFsck) {
  Scratch s;
  s.make_container();
  const std::string c = s.q("c.gcv"), pw = " --passfile " + s.q("pw") + " ";
  auto r = run_shell(bin() + " volume info " + c + " </dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Size:         1 MiB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Header copy:  slot 1, generation 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Key slot 0:   password, scrypt N=2^10"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Password:"), std::string::npos) << "asked for a password: " << r.output;
  r = run_shell(bin() + " volume fsck" + pw + c);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("16 chunks (16 holes)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("volume fsck: 100%"), std::string::npos) << "no progress: " << r.output;

  // Two chunks written through a mount; fsck then reads those and skips the holes.
  r = run_shell(bin() + " volume mount --engine cpu" + pw + c + " " + s.q("mnt"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_shell(bin() + " volume fsck" + pw + c);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is mounted on "), std::string::npos) << r.output;
  r = run_shell("dd if=/dev/urandom of=" + s.q("mnt/volume.img") + " bs=64K count=2 seek=5 conv=notrunc,fsync 2>&1; " +
                "fusermount3 -u " + s.q("mnt"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_shell(bin() + " volume fsck" + pw + c);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("16 chunks (14 holes)"), std::string::npos) << r.output;

  // A flipped byte in chunk 6 and in header slot 1: both reported, exit 26.
  const std::uint64_t chunk6 = 65536 + 24 + 6 * (65536 + 28) + 100;
  for (const std::uint64_t at : {chunk6, std::uint64_t{4096 + 40}}) {
    std::fstream f(s.path("c.gcv"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    const char b = static_cast<char>(f.get() ^ 0x01);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(b);
  }
  r = run_shell(bin() + " volume fsck" + pw + c);
  EXPECT_EQ(r.status, 26) << r.output;
  EXPECT_NE(r.output.find("chunk 6 of 16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("header: "), std::string::npos) << r.output;

  // passwd rewrites both copies: the old password opens neither, the damaged slot is whole again.
  write_file(s.path("new"), "new password\n");
  r = run_shell(bin() + " volume passwd" + pw + "--new-passfile " + s.q("new") + " " + c);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(run_shell(bin() + " volume fsck" + pw + c).status, 12);
  EXPECT_EQ(run_shell(bin() + " volume mount --engine cpu" + pw + c + " " + s.q("mnt")).status, 12);
  r = run_shell(bin() + " volume fsck --passfile " + s.q("new") + " " + c);
  EXPECT_EQ(r.status, 26) << r.output;
  EXPECT_EQ(r.output.find("header: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("checked 2 header copies"), std::string::npos) << r.output;

  // A directory vault given to the volume commands points at the directory ones.
  for (const std::string sub : {"info", "passwd", "fsck"}) {
    r = run_shell(bin() + " volume " + sub + " " + s.q("v") + " </dev/null");
    EXPECT_EQ(r.status, 23) << sub << ": " << r.output;
    EXPECT_NE(r.output.find("directory vault, not a volume container: use `gpucryptfs " + sub + "`"), std::string::npos)
        << r.output;
  }
}

TEST(CliPrompt, SizeSuffixesWhereverSizesAre) {
  Scratch s;
  ::mkdir(s.path("k").c_str(), 0700);
  auto r = run_shell(bin() + " init --chunk-size 16K --scrypt-logn 10 --passfile " + s.q("pw") + " " + s.q("k"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_shell(bin() + " info " + s.q("k"));
  EXPECT_NE(r.output.find("chunk size 16384"), std::string::npos) << r.output;
  r = run_shell(bin() + " volume create --size 1M --chunk-size 4096 --scrypt-logn 10 --passfile " + s.q("pw") + " " +
                s.q("c.gcv"));
  EXPECT_EQ(r.status, 0) << r.output;
}

// On a machine without libcuda.so.1 (no driver, so no usable GPU), `info` says so and does not
// blame the driver's age; --gpus naming a GPU is refused whether or not the build has CUDA.
TEST(CliPrompt, GpuMessageTellsNoDriverFromAnOldOne) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib) {
    ::dlclose(lib);
    GTEST_SKIP() << "this machine has an NVIDIA driver";
  }
  const auto r = run_shell(bin() + " info");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no NVIDIA GPU/driver found"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("new enough"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("too old"), std::string::npos) << r.output;
}

std::vector<std::string> help_commands() {
  return {"init",          "mount",        "passwd",        "info",        "fsck",       "bench",
          "keyslot list",  "keyslot add",  "keyslot remove", "rekey",
          "volume create", "volume mount", "volume resize", "volume info", "volume passwd", "volume fsck",
          "volume keyslot add", "volume keyslot remove", "volume rekey"};
}

// Descriptions of --help: each option's text with its continuation lines joined by one space.
std::map<std::string, std::string> option_texts(const std::string& help) {
  std::map<std::string, std::string> out;
  std::istringstream in(help.substr(help.find("options:")));
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.starts_with("  -")) {
      current = line.substr(0, line.find("  ", 2));
      out[current] = line.size() > current.size() ? line.substr(current.size()) : "";
    } else if (!current.empty() && line.starts_with("   ")) {
      out[current] += " " + line;
    }
  }
  for (auto& [k, text] : out) text = std::regex_replace(std::regex_replace(text, std::regex("\\s+"), " "), std::regex("^ | $"), "");
  return out;
}

// Wrapped narrow, the help holds the same words as unwrapped: a line break never cuts a word
// ("lost+fo / und"), and nothing is wider than the width asked for (but a word longer than it).
TEST(CliPrompt, HelpWrapsBetweenWords) {
  for (const auto& c : help_commands()) {
    const auto wide = run_shell("COLUMNS=2000 " + bin() + " " + c + " --help");
    const auto narrow = run_shell("COLUMNS=60 " + bin() + " " + c + " --help");
    ASSERT_EQ(wide.status, 0) << c << wide.output;
    EXPECT_EQ(option_texts(narrow.output), option_texts(wide.output)) << c << "\n" << narrow.output;
    std::istringstream in(wide.output.substr(wide.output.find("options:")));
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line))
      EXPECT_TRUE(line.starts_with("  -") || line.empty()) << c << ": wrapped at 2000 columns:\n" << line;
    in = std::istringstream(narrow.output.substr(narrow.output.find("options:")));
    while (std::getline(in, line)) {
      const auto last_space = line.rfind(' ');
      EXPECT_TRUE(line.size() <= 60 || last_space < 34) << c << ": wider than 60 columns:\n" << line;
    }
  }
  const auto fsck = run_shell("COLUMNS=80 " + bin() + " fsck --help");
  EXPECT_NE(fsck.output.find("CIPHERDIR/gpucryptfs.lost+found"), std::string::npos) << fsck.output;
}

// README's usage block and each command's --help cannot drift apart: every option the block
// shows exists, and every password option a command takes is shown.
TEST(CliPrompt, ReadmeUsageBlockMatchesEachHelp) {
  std::ifstream in(std::string(GCFS_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md not found";
  std::string line, block;
  bool inside = false, after_heading = false;
  while (std::getline(in, line)) {
    if (line == "## Usage") after_heading = true;
    else if (after_heading && !inside && line.starts_with("```")) inside = true;
    else if (inside && line.starts_with("```")) break;
    else if (inside) block += line + "\n";
  }
  ASSERT_FALSE(block.empty()) << "no usage block after '## Usage' in README.md";
  // Lines of one command: "gpucryptfs CMD ..." and its indented continuations.
  std::map<std::string, std::string> shown;
  std::istringstream lines(block);
  std::string cmd;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex("^gpucryptfs ((?:volume )?keyslot [a-z]+|volume [a-z]+|[a-z]+)"))) cmd = m[1];
    else if (!line.starts_with(" ")) cmd.clear();
    if (!cmd.empty()) shown[cmd] += line + "\n";
  }
  for (const auto& c : help_commands()) {
    ASSERT_TRUE(shown.count(c)) << "README's usage block has no line for 'gpucryptfs " << c << "'";
    const auto help = run_shell("COLUMNS=2000 " + bin() + " " + c + " --help");
    ASSERT_EQ(help.status, 0) << c;
    std::set<std::string> in_help;
    const std::regex opt("(^|[ \\[])(--[a-z][a-z0-9-]*|-[a-zA-Z])\\b");
    for (std::sregex_iterator it(help.output.begin(), help.output.end(), opt), end; it != end; ++it) in_help.insert((*it)[2]);
    const std::string& text = shown[c];
    for (std::sregex_iterator it(text.begin(), text.end(), opt), end; it != end; ++it)
      EXPECT_TRUE(in_help.count((*it)[2])) << "README shows " << (*it)[2] << " for 'gpucryptfs " << c
                                            << "', which its --help does not list";
    for (const char* pw_option : {"--passfile", "--extpass", "--new-passfile", "--keyfile", "--new-keyfile"}) {
      if (!in_help.count(pw_option)) continue;
      EXPECT_NE(text.find(pw_option), std::string::npos)
          << "'gpucryptfs " << c << "' takes " << pw_option << ", README's usage block does not show it";
    }
  }
}

// The man page (packaging/gpucryptfs.1) describes every option of every command's --help, in
// that command's section, so neither can grow an option the other does not know.
TEST(CliPrompt, ManPageDescribesEveryOptionOfEachHelp) {
  std::ifstream in(std::string(GCFS_SOURCE_DIR) + "/packaging/gpucryptfs.1");
  ASSERT_TRUE(in) << "packaging/gpucryptfs.1 not found";
  std::map<std::string, std::string> sections;  // ".SS" title's first word(s) -> its text, "\-" as "-"
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.starts_with(".SS \"")) {
      current = line.substr(5, line.find_first_of(" \"", 5) - 5);
      continue;
    }
    for (std::size_t p; (p = line.find("\\-")) != std::string::npos;) line.replace(p, 2, "-");
    if (!current.empty()) sections[current] += line + "\n";
  }
  for (const auto& c : help_commands()) {
    const std::string section = c.substr(0, c.find(' '));  // "volume", "keyslot": one section each
    ASSERT_TRUE(sections.count(section)) << "the man page has no section for '" << c << "'";
    const auto help = run_shell("COLUMNS=2000 " + bin() + " " + c + " --help");
    ASSERT_EQ(help.status, 0) << c;
    const std::regex opt("(^|[ \\[])(--[a-z][a-z0-9-]*)\\b");
    const std::string& text = sections[section];
    for (std::sregex_iterator it(help.output.begin(), help.output.end(), opt), end; it != end; ++it) {
      const std::string o = (*it)[2];
      if (o == "--help") continue;
      EXPECT_NE(text.find(o), std::string::npos) << "'gpucryptfs " << c << "' takes " << o << ", which its man page section does not describe";
    }
  }
}

}  // namespace
}  // namespace gcfs::test
