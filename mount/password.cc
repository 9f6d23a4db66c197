#include "mount/password.h"

#include <stdio.h>
#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "crypto/errors.h"
#include "crypto/secret.h"

namespace gcfs::cli {
namespace {

std::string first_line(std::string s) {
  auto nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

// Reads up to the first newline with plain read(2) into one buffer that is wiped afterwards; an
// ifstream would leave copies of the password in its own buffer and in reallocated strings.
std::string from_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot read the password file " + path + ": " + std::strerror(errno));
  std::string buf(64 * 1024, '\0');
  std::size_t len = 0;
  int err = 0;
  while (len < buf.size() && std::memchr(buf.data(), '\n', len) == nullptr) {
    ssize_t n = ::read(fd, buf.data() + len, buf.size() - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
  }
  ::close(fd);
  std::string pw;
  if (!err) {
    const char* nl = static_cast<const char*>(std::memchr(buf.data(), '\n', len));
    std::size_t end = nl ? static_cast<std::size_t>(nl - buf.data()) : len;
    if (end && buf[end - 1] == '\r') --end;
    pw.assign(buf.data(), end);
  }
  secure_wipe(buf.data(), buf.size());
  if (err) throw UserError("cannot read the password file " + path + ": " + std::strerror(err));
  return pw;
}

std::string from_program(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw UserError("cannot run the --extpass program: " + std::string(std::strerror(errno)));
  std::string out;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  secure_wipe(buf, sizeof buf);
  int status = ::pclose(p);
  if (status != 0) throw UserError("the --extpass program failed (exit status " + std::to_string(status) + ")");
  std::string pw = first_line(out);
  secure_wipe(out.data(), out.size());
  return pw;
}

std::string from_terminal(const std::string& prompt) {
  FILE* tty = std::fopen("/dev/tty", "r+");
  if (!tty) throw UserError("no terminal to ask for the password on: use --passfile or --extpass");
  std::fputs(prompt.c_str(), tty);
  std::fflush(tty);
  termios old{};
  const int fd = fileno(tty);
  const bool have_termios = ::tcgetattr(fd, &old) == 0;
  if (have_termios) {
    termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(fd, TCSAFLUSH, &quiet);
  }
  char* line = nullptr;
  size_t cap = 0;
  ssize_t n = ::getline(&line, &cap, tty);
  if (have_termios) ::tcsetattr(fd, TCSAFLUSH, &old);
  std::fputc('\n', tty);
  std::fclose(tty);
  std::string pw = n > 0 ? first_line(std::string(line, static_cast<size_t>(n))) : std::string();
  if (line) {
    secure_wipe(line, cap);
    std::free(line);
  }
  return pw;
}

}  // namespace

std::string read_password(const PasswordSource& src, const std::string& prompt, bool confirm) {
  std::string pw;
  if (!src.passfile.empty()) pw = from_file(src.passfile);
  else if (!src.extpass.empty()) pw = from_program(src.extpass);
  else {
    pw = from_terminal(prompt);
    if (confirm && !pw.empty() && from_terminal("Repeat password: ") != pw)
      throw UserError("the two passwords differ; nothing was changed");
  }
  if (pw.empty()) throw UserError("the password is empty; refusing (an empty password file or an empty answer)");
  return pw;
}

}  // namespace gcfs::cli
