#include "mount/password.h"

#include <stdio.h>
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

std::string from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read the password file " + path + ": " + std::strerror(errno));
  std::string line;
  std::getline(in, line);
  return first_line(line);
}

std::string from_program(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw UserError("cannot run the --extpass program: " + std::string(std::strerror(errno)));
  std::string out;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
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
