#include "fs/log.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <utility>
#include <vector>

#include "crypto/diagnostics.h"
#include "crypto/errors.h"

namespace gcfs::log {
namespace {

enum class Sink { Stderr, Syslog, File };

struct State {
  std::mutex mu;
  Sink sink = Sink::Stderr;
  FILE* file = nullptr;
  Level min = Level::Info;
  bool echo_warnings = false;
  // Warnings and errors said on stderr before a log was chosen (a password file others can
  // read, found before the password is asked for): the log the daemon opens later says them
  // too, so that they are not lost with the terminal. At most kEarlyMax.
  std::vector<std::pair<Level, std::string>> early;
};
constexpr std::size_t kEarlyMax = 32;

State& state() {
  static State s;
  return s;
}

const char* name(Level l) {
  switch (l) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warning: return "warning";
    case Level::Error: return "error";
  }
  return "?";
}

int syslog_priority(Level l) {
  switch (l) {
    case Level::Debug: return LOG_DEBUG;
    case Level::Info: return LOG_INFO;
    case Level::Warning: return LOG_WARNING;
    case Level::Error: return LOG_ERR;
  }
  return LOG_INFO;
}

// Writes one message to the current sink; state().mu is held.
void emit_locked(Level level, std::string_view message) {
  auto& s = state();
  if (s.sink == Sink::Syslog) {
    syslog(syslog_priority(level), "%.*s", static_cast<int>(message.size()), message.data());
    return;
  }
  FILE* out = s.sink == Sink::File && s.file ? s.file : stderr;
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::fprintf(out, "%s gpucryptfs[%d] %s: %.*s\n", stamp, static_cast<int>(getpid()), name(level),
               static_cast<int>(message.size()), message.data());
  std::fflush(out);
}

// The lower layers' messages (crypto/diagnostics.h) come here, into whichever log is chosen.
void from_lower_layers(diag::Level level, std::string_view message) {
  switch (level) {
    case diag::Level::Debug: return write(Level::Debug, message);
    case diag::Level::Info: return write(Level::Info, message);
    case diag::Level::Warning: return write(Level::Warning, message);
    case diag::Level::Error: return write(Level::Error, message);
  }
}

// Installed as the program starts: any binary that has this log sends the lower layers' messages
// to it, whichever command runs.
[[maybe_unused]] const bool g_lower_layers_routed = (diag::set_sink(&from_lower_layers), true);

// A log has just been chosen: what was said on stderr before it goes there too, once.
void replay_early_locked() {
  auto& s = state();
  for (const auto& [level, message] : s.early) emit_locked(level, message + " (said before the log was opened)");
  s.early.clear();
}

}  // namespace

void to_stderr() {
  std::lock_guard lk(state().mu);
  state().sink = Sink::Stderr;
}

void to_syslog() {
  std::lock_guard lk(state().mu);
  openlog("gpucryptfs", LOG_PID, LOG_USER);
  state().sink = Sink::Syslog;
  replay_early_locked();
}

namespace {

// True when something accepts datagrams on /dev/log, where syslog(3) sends; syslog(3) itself
// drops messages silently when nothing listens.
bool syslog_listening() {
  int s = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, "/dev/log");
  const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(s);
  return ok;
}

// $XDG_STATE_HOME/gpucryptfs, else $HOME/.local/state/gpucryptfs (the XDG default), created
// 0700 as needed; "" when neither variable gives an absolute path.
std::string state_dir() {
  std::string base;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && x[0] == '/') base = x;
  else if (const char* h = std::getenv("HOME"); h && h[0] == '/') base = std::string(h) + "/.local/state";
  if (base.empty()) return "";
  std::string dir;
  std::size_t start = 1;
  const std::string full = base + "/gpucryptfs";
  while (start <= full.size()) {
    std::size_t slash = full.find('/', start);
    if (slash == std::string::npos) slash = full.size();
    dir = full.substr(0, slash);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return "";
    start = slash + 1;
  }
  return full;
}

}  // namespace

std::string to_syslog_or_state_file() {
  if (syslog_listening()) {
    to_syslog();
    return "";
  }
  const std::string dir = state_dir();
  if (dir.empty()) {
    to_syslog();  // nowhere better to go; the caller says so
    return "";
  }
  const std::string path = dir + "/gpucryptfs.log";
  to_file(path);
  return path;
}

void to_file(const std::string& path) {
  // The daemon often runs as root and writes its log where a user may have a say (a home
  // folder): the file is never followed through a symlink, never made readable or writable by
  // others (0600, whatever the umask), never a FIFO (which could block every logging thread) or
  // block device, and never a second name of a file kept somewhere else (a hard link). A
  // character device is taken as it is: /dev/null, a terminal.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);
  if (fd < 0) {
    const int e = errno;
    struct stat lst {};
    if (e == ELOOP && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
      throw UserError("cannot open the log file " + path + ": it is a symbolic link (give the file it points to)");
    if (::lstat(path.c_str(), &lst) == 0 && S_ISFIFO(lst.st_mode))
      throw UserError("cannot open the log file " + path + ": it is not a regular file (a FIFO)");  // ENXIO
    throw UserError("cannot open the log file " + path + ": " + std::strerror(e));
  }
  struct stat st {};
  std::string refuse;
  if (::fstat(fd, &st) != 0) refuse = std::strerror(errno);
  else if (S_ISCHR(st.st_mode)) {}  // /dev/null, a terminal: nothing to own or to follow
  else if (!S_ISREG(st.st_mode)) refuse = "it is not a regular file";
  else if (st.st_nlink > 1) refuse = "it has " + std::to_string(st.st_nlink) + " hard links (a log file has one name)";
  else if (::fcntl(fd, F_SETFL, O_APPEND) != 0) refuse = std::strerror(errno);  // blocking writes again
  if (!refuse.empty()) {
    ::close(fd);
    throw UserError("cannot open the log file " + path + ": " + refuse);
  }
  FILE* f = ::fdopen(fd, "a");
  if (!f) {
    const int e = errno;
    ::close(fd);
    throw UserError("cannot open the log file " + path + ": " + std::strerror(e));
  }
  std::setvbuf(f, nullptr, _IOLBF, 0);
  std::lock_guard lk(state().mu);
  if (state().file) std::fclose(state().file);
  state().file = f;
  state().sink = Sink::File;
  replay_early_locked();
}

void set_min_level(Level level) {
  std::lock_guard lk(state().mu);
  state().min = level;
}

void echo_warnings_to_stderr(bool on) {
  std::lock_guard lk(state().mu);
  state().echo_warnings = on;
}

void write(Level level, std::string_view message) {
  auto& s = state();
  std::lock_guard lk(s.mu);
  if (level < s.min) return;
  if (s.echo_warnings && level >= Level::Warning && s.sink != Sink::Stderr)
    std::fprintf(stderr, "gpucryptfs: %s: %.*s\n", name(level), static_cast<int>(message.size()), message.data());
  if (s.sink == Sink::Stderr && level >= Level::Warning && s.early.size() < kEarlyMax)
    s.early.emplace_back(level, std::string(message));
  emit_locked(level, message);
}

}  // namespace gcfs::log
