// SIGHUP, SIGINT and SIGTERM handled on a thread of their own (stop_signals.h).
#include "mount/lifecycle/stop_signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

namespace gcfs::mount {
namespace {

std::atomic<int> g_write_fd{-1};

void note_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  const int fd = g_write_fd.load();
  if (fd >= 0 && ::write(fd, &b, 1) < 0) { /* the pipe is full: a signal is waiting already */ }
  errno = saved;
}

}  // namespace

StopSignals::StopSignals(std::function<void(int)> on_signal) : on_signal_(std::move(on_signal)) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  ::fcntl(pipe_[1], F_SETFL, O_NONBLOCK);
  g_write_fd.store(pipe_[1]);
  thread_ = std::thread([this] {
    for (;;) {
      unsigned char b = 0;
      const ssize_t n = ::read(pipe_[0], &b, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || b == 0) return;  // 0: the destructor's word to stop
      on_signal_(b);
    }
  });
  for (int i = 0; i < 4; ++i) {
    struct sigaction now {};
    if (::sigaction(kSignals[i], nullptr, &now) != 0 || now.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = kSignals[i] == SIGPIPE ? SIG_IGN : note_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // a thread the signal lands on carries on with what it was doing
    installed_[i] = ::sigaction(kSignals[i], &sa, &old_[i]) == 0;
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 4; ++i)
    if (installed_[i]) ::sigaction(kSignals[i], &old_[i], nullptr);
  g_write_fd.store(-1);
  const unsigned char stop = 0;
  while (::write(pipe_[1], &stop, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

}  // namespace gcfs::mount
