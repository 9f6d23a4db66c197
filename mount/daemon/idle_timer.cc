// --idle: unmount after a while without use, counting requests and open handles (idle_timer.h).
#include "mount/daemon/idle_timer.h"


#include <algorithm>
#include <boost/program_options/errors.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "fs/log.h"
#include "mount/fuse_api.h"

namespace gcfs::mount {
namespace {

std::atomic<std::uint64_t> g_requests{0};
std::atomic<std::int64_t> g_open{0};
fuse_lowlevel_ops g_inner{};
SessionIoOptions::DirectRead g_inner_direct_read = nullptr;
SessionIoOptions::DirectWrite g_inner_direct_write = nullptr;
fuse_lowlevel_ops g_counting{};

// One wrapper per operation, generated from the member's own type: it counts, then calls the
// filesystem's operation with the same arguments.
template <class Member, Member member>
struct Counted;
template <class... A, void (*fuse_lowlevel_ops::*member)(A...)>
struct Counted<void (*fuse_lowlevel_ops::*)(A...), member> {
  static void call(A... a) {
    g_requests.fetch_add(1, std::memory_order_relaxed);
    (g_inner.*member)(a...);
  }
};

#define GCFS_COUNT(name)                                                                                  \
  if (g_inner.name)                                                                                       \
    g_counting.name = &Counted<decltype(&fuse_lowlevel_ops::name), &fuse_lowlevel_ops::name>::call;

// Handles: the filesystem sets fi->fh (zero on arrival) when it hands one out.
void counted_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  g_requests.fetch_add(1, std::memory_order_relaxed);
  g_inner.open(req, ino, fi);
  if (fi->fh) g_open.fetch_add(1);
}
void counted_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  g_requests.fetch_add(1, std::memory_order_relaxed);
  g_inner.opendir(req, ino, fi);
  if (fi->fh) g_open.fetch_add(1);
}
void counted_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  g_requests.fetch_add(1, std::memory_order_relaxed);
  g_inner.create(req, parent, name, mode, fi);
  if (fi->fh) g_open.fetch_add(1);
}
void counted_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  g_requests.fetch_add(1, std::memory_order_relaxed);
  g_open.fetch_sub(1);
  g_inner.release(req, ino, fi);
}
void counted_releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  g_requests.fetch_add(1, std::memory_order_relaxed);
  g_open.fetch_sub(1);
  g_inner.releasedir(req, ino, fi);
}

std::string plural(long long n, const char* unit) { return std::to_string(n) + " " + unit + (n == 1 ? "" : "s"); }

std::string describe(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms % 1000) return std::to_string(ms) + " ms";
  const long long s = ms / 1000;
  if (s % 60) return plural(s, "second");
  if (s % 3600) return plural(s / 60, "minute");
  return plural(s / 3600, "hour");
}

}  // namespace

std::chrono::milliseconds parse_duration(const std::string& option, const std::string& text) {
  const auto bad = [&] {
    return boost::program_options::error(option + " " + text +
                                         ": give a duration such as 90 (seconds), 90s, 500ms, 15m, 2h or 1h30m");
  };
  if (text.empty()) throw bad();
  long double total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
    if (j == i || j - i > 12) throw bad();
    const long double n = std::stold(text.substr(i, j - i));
    std::size_t k = j;
    while (k < text.size() && std::isalpha(static_cast<unsigned char>(text[k]))) ++k;
    const std::string unit = text.substr(j, k - j);
    if (unit.empty() && (i != 0 || k != text.size())) throw bad();  // a bare number only alone
    long double scale;
    if (unit.empty() || unit == "s") scale = 1000;
    else if (unit == "ms") scale = 1;
    else if (unit == "m" || unit == "min") scale = 60'000;
    else if (unit == "h") scale = 3'600'000;
    else throw bad();
    total += n * scale;
    i = k;
  }
  if (total < 1 || total > 365.0L * 24 * 3'600'000) throw bad();
  return std::chrono::milliseconds(static_cast<long long>(total));
}

SessionIoOptions::DirectRead IdleWatch::counting(SessionIoOptions::DirectRead inner) {
  g_inner_direct_read = inner;
  return [](void* ctx, std::uint64_t fh, std::uint64_t off, std::size_t size, unsigned char* room,
            std::size_t room_bytes, const unsigned char** data) -> long {
    g_requests.fetch_add(1, std::memory_order_relaxed);
    return g_inner_direct_read(ctx, fh, off, size, room, room_bytes, data);
  };
}

SessionIoOptions::DirectWrite IdleWatch::counting(SessionIoOptions::DirectWrite inner) {
  g_inner_direct_write = inner;
  return [](void* ctx, std::uint64_t fh, std::uint64_t off, const unsigned char* data, std::size_t size,
            bool writepage) -> long {
    g_requests.fetch_add(1, std::memory_order_relaxed);
    return g_inner_direct_write(ctx, fh, off, data, size, writepage);
  };
}

const fuse_lowlevel_ops* IdleWatch::counting(const fuse_lowlevel_ops* inner) {
  g_inner = *inner;
  g_counting = *inner;  // init, destroy and forget pass straight through: they are not use
  GCFS_COUNT(lookup)
  GCFS_COUNT(getattr)
  GCFS_COUNT(setattr)
  GCFS_COUNT(readlink)
  GCFS_COUNT(mknod)
  GCFS_COUNT(mkdir)
  GCFS_COUNT(unlink)
  GCFS_COUNT(rmdir)
  GCFS_COUNT(symlink)
  GCFS_COUNT(rename)
  GCFS_COUNT(link)
  GCFS_COUNT(read)
  GCFS_COUNT(write)
  GCFS_COUNT(flush)
  GCFS_COUNT(fsync)
  GCFS_COUNT(readdir)
  GCFS_COUNT(fsyncdir)
  GCFS_COUNT(statfs)
  GCFS_COUNT(setxattr)
  GCFS_COUNT(getxattr)
  GCFS_COUNT(listxattr)
  GCFS_COUNT(removexattr)
  GCFS_COUNT(access)
  GCFS_COUNT(getlk)
  GCFS_COUNT(setlk)
  GCFS_COUNT(bmap)
  GCFS_COUNT(ioctl)
  GCFS_COUNT(poll)
  GCFS_COUNT(write_buf)
  GCFS_COUNT(retrieve_reply)
  GCFS_COUNT(flock)
  GCFS_COUNT(fallocate)
  GCFS_COUNT(readdirplus)
  GCFS_COUNT(copy_file_range)
  GCFS_COUNT(lseek)
  if (g_inner.open) g_counting.open = counted_open;
  if (g_inner.opendir) g_counting.opendir = counted_opendir;
  if (g_inner.create) g_counting.create = counted_create;
  if (g_inner.release) g_counting.release = counted_release;
  if (g_inner.releasedir) g_counting.releasedir = counted_releasedir;
  return &g_counting;
}

IdleWatch::IdleWatch(std::chrono::milliseconds idle, std::function<UnmountResult()> unmount)
    : idle_(idle), unmount_(std::move(unmount)), thread_([this] { run(); }) {}

IdleWatch::~IdleWatch() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void IdleWatch::run() {
  using clock = std::chrono::steady_clock;
  const auto tick = std::clamp(idle_ / 10, std::chrono::milliseconds(50), std::chrono::milliseconds(10'000));
  auto last_use = clock::now();
  std::uint64_t seen = g_requests.load();
  std::unique_lock lk(mu_);
  bool said_busy = false, said_refused = false;
  while (!cv_.wait_for(lk, tick, [&] { return stop_; })) {
    const std::uint64_t now_requests = g_requests.load();
    if (now_requests != seen || g_open.load() > 0) {
      seen = now_requests;
      last_use = clock::now();
      continue;
    }
    if (clock::now() - last_use < idle_) continue;
    log::info("unused for " + describe(idle_) + " (--idle): unmounting");
    const UnmountResult r = unmount_();
    if (r == UnmountResult::Unmounted || r == UnmountResult::Gone) return;
    if (r == UnmountResult::Busy && !said_busy)
      log::info("--idle: the mount is busy (a process holds something on it); trying again later");
    if (r == UnmountResult::Refused && !said_refused)
      log::warning("--idle: not unmounted (see the line above); trying again later");
    (r == UnmountResult::Busy ? said_busy : said_refused) = true;
    last_use = clock::now();
  }
}

}  // namespace gcfs::mount
