// read_password (mount/cli/password.h) from each source: a password file, an --extpass program,
// standard input when it is a pipe, and the terminal (a pseudo-terminal here, with the two-prompt
// confirmation and type-ahead), and their error paths.
// The password comes back as a SecretString; every way out of these paths wipes it.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "crypto/errors.h"
#include "mount/cli/password.h"

namespace gcfs::cli {
namespace {

std::string temp_file(const std::string& contents) {
  char name[] = "/tmp/gcfs-pwtest-XXXXXX";
  const int fd = ::mkstemp(name);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
  ::close(fd);
  return name;
}

std::string passfile_password(const std::string& contents) {
  const std::string path = temp_file(contents);
  PasswordSource src;
  src.passfile = path;
  std::string got;
  try {
    got = std::string(read_password(src, "unused").view());
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
  ::unlink(path.c_str());
  return got;
}

std::string extpass_password(const std::string& cmd) {
  PasswordSource src;
  src.extpass = cmd;
  return std::string(read_password(src, "unused").view());
}

TEST(ReadPassword, PassfileGivesItsFirstLineWithoutTheLineEnd) {
  EXPECT_EQ(passfile_password("first line\nsecond line\n"), "first line");
  EXPECT_EQ(passfile_password("windows\r\nmore"), "windows");
  EXPECT_EQ(passfile_password("no newline at all"), "no newline at all");
  EXPECT_THROW(passfile_password(""), UserError);
  EXPECT_THROW(passfile_password("\nsecond line"), UserError);  // the first line is empty
  PasswordSource missing;
  missing.passfile = "/nonexistent/gcfs-pwtest";
  EXPECT_THROW(read_password(missing, "unused"), UserError);
}

TEST(ReadPassword, ExtpassGivesTheFirstLineOfTheProgramsOutput) {
  EXPECT_EQ(extpass_password("printf 'from a program\\nignored\\n'"), "from a program");
  EXPECT_THROW(extpass_password("echo partial; exit 3"), UserError);
  EXPECT_THROW(extpass_password("true"), UserError);  // no output: an empty password
  // Output longer than the cap: the password is cut at 64 KiB, and the rest is still read, so the
  // program is not killed by SIGPIPE (which would make it fail).
  const std::string long_pw = extpass_password("head -c 200000 /dev/zero | tr '\\0' x");
  EXPECT_EQ(long_pw, std::string(64 * 1024, 'x'));
}

// Runs read_password(terminal, confirm) in a child whose controlling terminal is a new pty, types
// the given lines at each prompt once the child has turned echo off, and returns the child's
// exit status (0: read; 3: UserError) and what it read or the error message.
constexpr int kNoPty = -2;

struct TerminalResult {
  int status = -1;  // kNoPty: this machine gives no pseudo-terminal
  std::string text;
  std::string screen;  // what the child wrote to the terminal
};

// ahead: type every line at once before the child even starts (type-ahead: pasted, auto-typed).
TerminalResult type_at_terminal(const std::vector<std::string>& lines, bool ahead = false) {
  TerminalResult r;
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    if (master >= 0) ::close(master);
    r.status = kNoPty;
    return r;
  }
  const std::string slave_name = ::ptsname(master);
  int out[2];
  if (::pipe(out) != 0) return r;
  std::size_t typed = 0;
  // Opened here too, so the terminal's input queue exists before anything is typed into it.
  const int early_slave = ::open(slave_name.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (ahead) {
    for (const auto& l : lines) {
      const std::string line = l + "\n";
      (void)!::write(master, line.data(), line.size());
    }
    typed = lines.size();
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(20);  // never hang the test run
    ::close(out[0]);
    ::setsid();
    const int slave = ::open(slave_name.c_str(), O_RDWR);  // becomes the controlling terminal
    if (slave < 0) ::_exit(4);
    ::dup2(slave, STDIN_FILENO);  // as in a shell: standard input is the terminal
    int status = 0;
    std::string text;
    try {
      const SecretString pw = read_password(PasswordSource{}, "Password: ", true);
      text = std::string(pw.view());
    } catch (const UserError& e) {
      text = e.what();
      status = 3;
    }
    (void)!::write(out[1], text.data(), text.size());
    ::_exit(status);
  }
  ::close(out[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  const char* prompts[] = {"Password: ", "Repeat password: "};
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      char buf[256];
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n > 0) r.screen.append(buf, static_cast<std::size_t>(n));
    }
    // Type the next line once its prompt is on the screen and echo is off, as a person would.
    termios t{};
    if (typed < lines.size() && typed < 2 && r.screen.find(prompts[typed]) != std::string::npos &&
        ::tcgetattr(master, &t) == 0 && !(t.c_lflag & ECHO)) {
      const std::string line = lines[typed] + "\n";
      (void)!::write(master, line.data(), line.size());
      ++typed;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      char buf[512];
      ssize_t n;
      while ((n = ::read(out[0], buf, sizeof buf)) > 0) r.text.append(buf, static_cast<std::size_t>(n));
      break;
    }
  }
  if (r.status < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  ::close(out[0]);
  if (early_slave >= 0) ::close(early_slave);
  ::close(master);
  return r;
}

TEST(ReadPassword, TerminalAsksTwiceWithEchoOffAndAcceptsEqualAnswers) {
  const TerminalResult r = type_at_terminal({"typed secret", "typed secret"});
  if (r.status == kNoPty) GTEST_SKIP() << "no pseudo-terminal on this machine";
  ASSERT_EQ(r.status, 0) << r.text << "\nscreen: " << r.screen;
  EXPECT_EQ(r.text, "typed secret");
  EXPECT_EQ(r.screen.find("typed secret"), std::string::npos) << "echoed: " << r.screen;
}

// Both answers typed before the first prompt: turning echo off must not flush them (it did with
// TCSAFLUSH, and the password came out empty).
TEST(ReadPassword, TerminalKeepsWhatWasTypedAhead) {
  const TerminalResult r = type_at_terminal({"typed ahead", "typed ahead"}, true);
  if (r.status == kNoPty) GTEST_SKIP() << "no pseudo-terminal on this machine";
  ASSERT_EQ(r.status, 0) << r.text << "\nscreen: " << r.screen;
  EXPECT_EQ(r.text, "typed ahead");
}

// Standard input that is a pipe holds the password (once, even with confirm), and the line after
// it stays for the next question.
TEST(ReadPassword, StandardInputThatIsNoTerminalIsRead) {
  int in[2], out[2];
  ASSERT_EQ(::pipe(in), 0);
  ASSERT_EQ(::pipe(out), 0);
  const std::string typed = "first\nsecond\n";
  ASSERT_EQ(::write(in[1], typed.data(), typed.size()), static_cast<ssize_t>(typed.size()));
  ::close(in[1]);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDERR_FILENO);  // where "Reading password from stdin" goes
    std::string text;
    try {
      text = std::string(read_password(PasswordSource{}, "unused", true).view());
      text += "|" + std::string(read_password(PasswordSource{}, "unused").view());
    } catch (const UserError& e) {
      text = std::string("error: ") + e.what();
    }
    (void)!::write(out[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(in[0]);
  ::close(out[1]);
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(got, "Reading password from stdin\nReading password from stdin\nfirst|second");
}

TEST(ReadPassword, TerminalRefusesTwoDifferentAnswers) {
  const TerminalResult r = type_at_terminal({"first answer", "second answer"});
  if (r.status == kNoPty) GTEST_SKIP() << "no pseudo-terminal on this machine";
  ASSERT_EQ(r.status, 3) << r.text << "\nscreen: " << r.screen;
  EXPECT_NE(r.text.find("differ"), std::string::npos) << r.text;
}

}  // namespace
}  // namespace gcfs::cli
