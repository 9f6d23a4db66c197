// A client of mount --ctlsock's socket for the tests: one connection, JSON requests, one reply
// line each.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

namespace gcfs::test {

// One connection to the socket at path (reached from its directory: sun_path is short).
class Client {
 public:
  explicit Client(const std::string& path, int timeout_s = 10) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const auto slash = path.rfind('/');
    const int cwd = ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str() + slash + 1, sizeof addr.sun_path - 1);
    connected_ = ::chdir(path.substr(0, slash).c_str()) == 0 &&
                 ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (::fchdir(cwd) != 0) connected_ = false;
    ::close(cwd);
    timeval tv{timeout_s, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  // Sends text and returns the next reply line, parsed (null when none came).
  nlohmann::json ask(const std::string& text) {
    if (::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(text.size())) return nullptr;
    return next();
  }
  nlohmann::json next() {
    while (pending_.find('\n') == std::string::npos) {
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return nullptr;
      pending_.append(buf, static_cast<std::size_t>(n));
    }
    const auto nl = pending_.find('\n');
    auto j = nlohmann::json::parse(pending_.substr(0, nl));
    pending_.erase(0, nl + 1);
    return j;
  }
  nlohmann::json encrypt(const std::string& p) { return ask(nlohmann::json{{"EncryptPath", p}}.dump()); }
  nlohmann::json decrypt(const std::string& p) { return ask(nlohmann::json{{"DecryptPath", p}}.dump()); }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string pending_;
};

}  // namespace gcfs::test
