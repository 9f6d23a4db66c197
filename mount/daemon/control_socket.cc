// The control socket (control_socket.h).
#include "mount/daemon/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "crypto/errors.h"
#include "fs/log.h"

namespace gcfs::mount {
namespace {

// Connections served at once; one more is accepted and closed at once.
constexpr std::size_t kMaxConnections = 64;

bool fill_address(const std::string& path, sockaddr_un* addr) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof addr->sun_path) return false;
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

// Whether a live server answers on the socket at path.
bool answered(const std::string& path) {
  sockaddr_un addr{};
  if (!fill_address(path, &addr)) return false;
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return s && ::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

std::string reply(const std::string& result, int err, const std::string& err_text, const std::string& warn) {
  nlohmann::ordered_json j;
  j["Result"] = result;
  j["ErrNo"] = err;
  j["ErrText"] = err_text;
  j["WarnText"] = warn;
  // Names that are not UTF-8 (a plaintext name may be any bytes) are escaped, not refused.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string error_text(int err) {
  std::string s = std::strerror(err);
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

struct Connection {
  UniqueFd fd;
  std::string in;  // what came and is not answered yet
};

// The end of the request in buf when it is complete: a newline, or a whole JSON value (clients
// of gocryptfs's socket send one object per write, without a newline). npos while incomplete.
std::size_t request_end(const std::string& buf, bool* broken) {
  *broken = false;
  if (auto nl = buf.find('\n'); nl != std::string::npos) return nl + 1;
  try {
    const auto whole = nlohmann::json::parse(buf);
    (void)whole;
    return buf.size();
  } catch (const nlohmann::json::parse_error& e) {
    // An error at the very end is input still to come; anywhere before, it is malformed.
    if (e.byte >= buf.size()) return std::string::npos;
    *broken = true;
    return buf.size();
  }
}

}  // namespace

std::string ControlSocket::answer(PathTranslator& paths, std::string_view request) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(request);
  } catch (const nlohmann::json::exception& e) {
    return reply("", -1, std::string("JSON Unmarshal error: ") + e.what(), "");
  }
  if (!j.is_object()) return reply("", -1, "JSON Unmarshal error: the request is not an object", "");
  const auto field = [&](const char* name, std::string* out) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return true;
    if (!it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  std::string enc, dec;
  if (!field("EncryptPath", &enc) || !field("DecryptPath", &dec))
    return reply("", -1, "JSON Unmarshal error: EncryptPath and DecryptPath are strings", "");
  if (!enc.empty() && !dec.empty()) return reply("", -1, "Ambiguous", "");
  if (enc.empty() && dec.empty()) return reply("", -1, "Empty input", "");
  const std::string& given = enc.empty() ? dec : enc;
  const std::string clean = canonical_path(given);
  std::string warn;
  if (clean != given)
    warn = "Non-canonical input path '" + given + "' has been interpreted as '" + clean + "'.";
  std::string out;
  const int rc = enc.empty() ? paths.decrypt_path(clean, &out) : paths.encrypt_path(clean, &out);
  if (rc < 0) return reply("", -rc, error_text(-rc), warn);
  return reply(out, 0, "", warn);
}

std::string ControlSocket::check_path(const std::string& path) {
  sockaddr_un addr{};
  if (!fill_address(path, &addr))
    return "is longer than a socket's path may be (" + std::to_string(sizeof addr.sun_path - 1) + " bytes)";
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return "exists and is not a socket (it is never replaced)";
    if (answered(path)) return "is a socket another program serves";
    return "";
  }
  if (errno != ENOENT) return std::strerror(errno);
  const auto slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "is in no existing directory";
  return "";
}

ControlSocket::ControlSocket(const std::string& path, PathTranslator& paths) : path_(path), paths_(paths) {
  if (const std::string why = check_path(path); !why.empty()) throw UserError("--ctlsock " + path + ": " + why);
  struct stat st {};
  // A stale socket (check_path said so), and still one now: a file put in its place since the
  // check is never removed.
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
  sockaddr_un addr{};
  fill_address(path, &addr);
  listen_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_) throw UserError(std::string("--ctlsock: socket: ") + std::strerror(errno));
  // 0600 from the start: bind makes the file with the umask's mode, and nobody else may connect
  // between the bind and a chmod.
  const mode_t old = ::umask(0177);
  const int b = ::bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  ::umask(old);
  if (b != 0) throw UserError("--ctlsock " + path + ": " + std::strerror(bind_errno));
  if (::lstat(path.c_str(), &st) == 0) {
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  if (::listen(listen_.get(), 16) != 0) {
    const int e = errno;
    ::unlink(path.c_str());
    throw UserError("--ctlsock " + path + ": listen: " + std::strerror(e));
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::unlink(path.c_str());
    throw UserError(std::string("--ctlsock: pipe: ") + std::strerror(errno));
  }
  stop_read_ = UniqueFd(p[0]);
  stop_write_ = UniqueFd(p[1]);
  thread_ = std::thread([this] { serve(); });
  log::info("control socket on " + path);
}

ControlSocket::~ControlSocket() {
  if (thread_.joinable()) {
    const char c = 0;
    (void)!::write(stop_write_.get(), &c, 1);
    thread_.join();
  }
  // Removed only while it is still the socket bound here: someone may have put another in its place.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == dev_ && st.st_ino == ino_)
    ::unlink(path_.c_str());
}

bool ControlSocket::take_input(int fd, std::string& in) {
  char buf[4096];
  const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false;  // closed by the client, or broken
  in.append(buf, static_cast<std::size_t>(n));
  const std::string too_long = reply("", -1, "request longer than " + std::to_string(kMaxRequestBytes) + " bytes", "");
  while (!in.empty()) {
    bool broken = false;
    const std::size_t end = request_end(in, &broken);
    if (end == std::string::npos) {  // more to come, unless it is too long already
      if (in.size() <= kMaxRequestBytes) return true;
      (void)!::send(fd, too_long.data(), too_long.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      return false;
    }
    const std::string request = in.substr(0, end);
    in.erase(0, end);
    if (!broken && request.find_first_not_of(" \t\r\n") == std::string::npos) continue;  // a blank line
    const std::string r = request.size() > kMaxRequestBytes ? too_long : answer(paths_, request);
    // A reply is a line; a client that reads none fills its buffer and is dropped.
    if (::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(r.size())) return false;
  }
  return true;
}

void ControlSocket::serve() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({{stop_read_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}});
    for (const auto& c : conns) fds.push_back({c.fd.get(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      log::error(std::string("control socket: poll: ") + std::strerror(errno) + "; it stops answering");
      return;
    }
    if (fds[0].revents) return;
    std::vector<bool> drop(conns.size(), false);
    for (std::size_t i = 0; i < conns.size(); ++i)
      if (fds[i + 2].revents) drop[i] = !take_input(conns[i].fd.get(), conns[i].in);
    for (std::size_t i = conns.size(); i-- > 0;)
      if (drop[i]) conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));
    if (fds[1].revents) {
      UniqueFd s(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (s && conns.size() < kMaxConnections) conns.push_back({std::move(s), {}});
    }
  }
}

}  // namespace gcfs::mount
