// Where a password comes from: --passfile, --extpass, standard input, the terminal (password.h).
#include "mount/cli/password.h"

#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "crypto/errors.h"
#include "fs/log.h"
#include "fs/unique_fd.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"

namespace gcfs::cli {
namespace {

// A password longer than this is cut here (it is still far beyond any typed one).
constexpr std::size_t kMaxPasswordBytes = 64 * 1024;

// The first line of s, without its "\r\n" or "\n", in secret memory.
SecretString first_line(std::string_view s) {
  const auto nl = s.find('\n');
  if (nl != std::string_view::npos) s = s.substr(0, nl);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return SecretString(s);
}

// As ssh does for a private key: a secret in a file that its group or everyone can read is
// anyone's. Said, not refused (a vault's owner may have reasons), on the terminal and, through
// the log's replay of early warnings, in the daemon's log. Pipes and process substitutions
// (<(pass show vault)) have no such mode and are not judged.
void warn_if_others_can_read(int fd, const std::string& path, const char* what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !(st.st_mode & (S_IRGRP | S_IROTH))) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  const char* who = (st.st_mode & S_IROTH) ? "every user" : "its group";
  log::warning(std::string("the ") + what + " " + path + " can be read by " + who + " (mode " + mode +
               "): whoever reads it can open the vault; make it readable by its owner alone ('chmod 600 " + path + "')");
}

// Reads up to the first newline with plain read(2) into secret memory; an ifstream or a FILE
// would leave copies of the password in their own buffers, and a growing std::string in the
// heap blocks it leaves behind.
SecretString from_file(const std::string& path, const char* what = "password file") {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw UserError("cannot read the " + std::string(what) + " " + path + ": " + std::strerror(errno));
  warn_if_others_can_read(fd.get(), path, what);
  SecretBytes buf(kMaxPasswordBytes);
  std::size_t len = 0;
  while (len < buf.size() && std::memchr(buf.data(), '\n', len) == nullptr) {
    ssize_t n = ::read(fd.get(), buf.data() + len, buf.size() - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError("cannot read the " + std::string(what) + " " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    len += static_cast<std::size_t>(n);
  }
  return first_line({reinterpret_cast<const char*>(buf.data()), len});
}

// The program's output is read from the pipe's descriptor with read(2), never through the FILE,
// whose buffer would keep a copy; only the first line is kept, the rest is drained and wiped so
// that the program does not die of SIGPIPE.
SecretString from_program(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw UserError("cannot run the --extpass program: " + std::string(std::strerror(errno)));
  SecretString out;
  SecretBytes buf(256);  // wiped on every way out
  bool line_done = false;
  for (;;) {
    ssize_t n = ::read(fileno(p), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const std::string_view got(reinterpret_cast<const char*>(buf.data()), static_cast<std::size_t>(n));
    if (!line_done && out.size() < kMaxPasswordBytes) {
      out.append(got.substr(0, kMaxPasswordBytes - out.size()));
      line_done = got.find('\n') != std::string_view::npos;
    }
  }
  const int status = ::pclose(p);
  if (status != 0) throw UserError("the --extpass program failed (exit status " + std::to_string(status) + ")");
  return first_line(out.view());
}

// Turns the terminal's echo off for as long as it lives, on every way out. TCSANOW, not
// TCSAFLUSH: a password typed or pasted before the prompt (type-ahead, a password manager's
// auto-type) is already in the terminal's input queue, and flushing would throw it away.
class EchoOff {
 public:
  explicit EchoOff(int fd) : fd_(fd), have_(::tcgetattr(fd, &old_) == 0) {
    if (!have_) return;
    termios quiet = old_;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(fd_, TCSANOW, &quiet);
  }
  ~EchoOff() {
    if (have_) ::tcsetattr(fd_, TCSANOW, &old_);
  }
  EchoOff(const EchoOff&) = delete;
  EchoOff& operator=(const EchoOff&) = delete;

 private:
  int fd_;
  termios old_{};
  bool have_;
};

void write_text(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

// One line from fd, read byte by byte with read(2) straight into secret memory: stdio would keep
// the line in its FILE buffer, and getline in a heap block of its own. Reading no further than
// the newline leaves the next line for the next question (passwd reads two from standard input).
SecretString read_line(int fd, const char* what) {
  SecretString pw;
  char c = 0;
  for (;;) {
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError(std::string("cannot read the password from ") + what + ": " + std::strerror(errno));
    if (n == 0 || c == '\n') break;
    if (pw.size() < kMaxPasswordBytes) pw.push_back(c);
  }
  secure_wipe(&c, 1);
  if (!pw.empty() && pw.view().back() == '\r') pw.pop_back();
  return pw;
}

SecretString from_terminal(const std::string& prompt) {
  UniqueFd tty(::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!tty) throw UserError("no terminal to ask for the password on: use --passfile or --extpass, or give it on standard input");
  write_text(tty.get(), prompt);
  SecretString pw;
  {
    EchoOff quiet(tty.get());
    pw = read_line(tty.get(), "the terminal");
  }
  write_text(tty.get(), "\n");
  return pw;
}

// Standard input that is open and not a terminal (a pipe, a file, /dev/null) holds the password,
// as in gocryptfs; a closed one leaves the terminal.
bool stdin_holds_password() {
  return ::fcntl(STDIN_FILENO, F_GETFD) != -1 && ::isatty(STDIN_FILENO) == 0;
}

SecretString from_stdin(const char* what = "password") {
  // Said on stderr, so that a script that meant a prompt sees where the password came from.
  write_text(STDERR_FILENO, std::string("Reading ") + what + " from stdin\n");
  return read_line(STDIN_FILENO, "standard input");
}

}  // namespace

SecretString read_password(const PasswordSource& src, const std::string& prompt, bool confirm) {
  SecretString pw;
  if (!src.passfile.empty()) pw = from_file(src.passfile);
  else if (!src.extpass.empty()) pw = from_program(src.extpass);
  else if (stdin_holds_password()) {
    pw = from_stdin();  // once, even with confirm: nobody types into a pipe twice
  } else {
    pw = from_terminal(prompt);
    if (confirm && !pw.empty() && !from_terminal("Repeat password: ").equals(pw))
      throw UserError("the two passwords differ; nothing was changed");
  }
  if (pw.empty())
    throw CodedError(kExitEmptyPassword,
                     "the password is empty; refusing (an empty password file, answer, program output or standard input)");
  return pw;
}

void add_keyfile_option(boost::program_options::options_description& opts, std::string* keyfile) {
  opts.add_options()("keyfile", boost::program_options::value(keyfile),
                     "unlock with this key file instead of a password: its whole content (any bytes, up to 8 MiB) "
                     "is the secret of a key-file slot");
}

void require_one_secret_source(const PasswordSource& src) {
  const int given = !src.passfile.empty() + !src.extpass.empty() + !src.keyfile.empty();
  if (given > 1) throw boost::program_options::error("give one of --passfile, --extpass and --keyfile, not several");
}

void require_new_secret_source(const PasswordSource& src) {
  if (!src.passfile.empty() && !src.keyfile.empty())
    throw boost::program_options::error("give one of --new-passfile and --new-keyfile, not both");
}

SecretString read_key_file(const std::string& path, const char* what) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw UserError("cannot read the " + std::string(what) + " " + path + ": " + std::strerror(errno));
  warn_if_others_can_read(fd.get(), path, what);
  // One byte past the limit tells a file that is too large from one that fills it exactly.
  SecretBytes buf(kMaxKeyFileBytes + 1);
  std::size_t len = 0;
  while (len < buf.size()) {
    ssize_t n = ::read(fd.get(), buf.data() + len, buf.size() - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError("cannot read the " + std::string(what) + " " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    len += static_cast<std::size_t>(n);
  }
  if (len == 0) throw CodedError(kExitEmptyPassword, "the " + std::string(what) + " " + path + " is empty; refusing");
  if (len > kMaxKeyFileBytes)
    throw UserError("the " + std::string(what) + " " + path + " is larger than " +
                    std::to_string(kMaxKeyFileBytes >> 20) + " MiB, the most a key file may hold");
  return SecretString(std::string_view(reinterpret_cast<const char*>(buf.data()), len));
}

UnlockSecret read_unlock_secret(const PasswordSource& src, const std::string& prompt, bool confirm) {
  if (!src.keyfile.empty()) return {read_key_file(src.keyfile), KeySlotKind::KeyFile};
  return {read_password(src, prompt, confirm), KeySlotKind::Password};
}

SecretString read_master_key_text(const std::string& file) {
  SecretString text;
  if (!file.empty()) text = from_file(file, "master key file");
  else if (stdin_holds_password()) text = from_stdin("master key");
  else text = from_terminal("Master key: ");
  if (text.empty()) throw CodedError(kExitBadMasterKey, "the master key is empty");
  return text;
}

}  // namespace gcfs::cli
