// SIGHUP, SIGINT and SIGTERM end a mount, as libfuse's fuse_set_signal_handlers arranged it, but
// what they do runs on a thread of its own rather than in the handler, which can only note the
// signal: the daemon unmounts its mount by identity (mount/lifecycle/owned_mount.h) while the request threads
// still serve, so that whatever the unmount asks of the filesystem (a write-back of cached pages)
// is answered.
//
// As with libfuse, a signal that was ignored when the daemon started (nohup's SIGHUP) stays
// ignored, and SIGPIPE is ignored: a reply to a process that has gone must not end the daemon.
#pragma once

#include <csignal>
#include <functional>
#include <thread>

namespace gcfs::mount {

class StopSignals {
 public:
  // on_signal(signal number) runs on the watcher thread, once per signal received. One instance
  // at a time.
  explicit StopSignals(std::function<void(int)> on_signal);
  ~StopSignals();  // puts the previous handlers back, then stops the thread
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr int kSignals[] = {SIGHUP, SIGINT, SIGTERM, SIGPIPE};
  std::function<void(int)> on_signal_;
  int pipe_[2] = {-1, -1};
  struct sigaction old_[4] = {};
  bool installed_[4] = {};
  std::thread thread_;
};

}  // namespace gcfs::mount
