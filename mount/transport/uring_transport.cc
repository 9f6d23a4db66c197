// The io_uring transport's public calls (mount/transport/uring_transport.h): prepare() starts the
// serving threads, which build their rings (uring_registration.cc); activate() walks them through
// the rounds of registration and lets them serve (uring_serving.cc); stop() ends them.
#include "mount/transport/uring_transport.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "fs/log.h"
#include "mount/transport/uring_rings.h"

namespace gcfs::mount {

UringTransport::UringTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<UringTransport> UringTransport::prepare(fuse_session* se, int fuse_fd, const UringOptions& options,
                                                        std::string* why) {
  const unsigned queues = possible_cpu_count();
  if (queues == 0) {
    *why = "cannot read /sys/devices/system/cpu/possible (the kernel keeps one queue per possible CPU)";
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->se = se;
  impl->fuse_fd = fuse_fd;
  impl->options = options;
  impl->queues = queues;
  impl->last_queue = queues - 1;
  {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0)
      for (unsigned c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) impl->allowed_cpus.push_back(c);
  }
  impl->wake_fd = ::eventfd(0, EFD_CLOEXEC);
  if (impl->wake_fd < 0) {
    *why = std::string("eventfd: ") + std::strerror(errno);
    return nullptr;
  }
  const unsigned n = serving_threads(queues, options.max_threads);
  for (unsigned i = 0; i < n; ++i) {
    auto t = std::make_unique<RingThread>();
    if (n >= queues) t->cpus.push_back(i % queues);  // several threads per queue
    else
      for (unsigned q = i; q < queues; q += n) t->cpus.push_back(q);  // several queues per thread
    impl->threads.push_back(std::move(t));
  }
  Impl* p = impl.get();
  // Owned before any thread starts: on every way out, its destructor stops and joins them.
  std::unique_ptr<UringTransport> transport(new UringTransport(std::move(impl)));
  try {
    for (auto& t : p->threads) {
      RingThread* tp = t.get();
      t->thread = std::thread([p, tp] { p->run(*tp); });
    }
  } catch (const std::system_error& e) {
    *why = std::string("cannot start the io_uring threads: ") + e.what();
    return nullptr;
  }
  if (std::string failure = p->wait_reports(); !failure.empty()) {
    *why = failure;
    return nullptr;  // the destructor stops the threads and releases what was built
  }
  // The entries of the rounds (see Command), now that every thread has built its own.
  RingEntry* first_other = nullptr;
  RingEntry* first_rest = nullptr;
  for (auto& t : p->threads)
    for (auto& e : t->entries) {
      if (e->qid != p->last_queue) {
        if (!first_other) first_other = e.get();
      } else if (!p->completing) {
        p->completing = e.get();
      } else if (!first_rest) {
        first_rest = e.get();
      }
    }
  switch (options.refuse_for_test) {
    case UringOptions::Refuse::None: break;
    case UringOptions::Refuse::Others: p->refused_for_test = first_other; break;
    case UringOptions::Refuse::Completing: p->refused_for_test = p->completing; break;
    case UringOptions::Refuse::Rest: p->refused_for_test = first_rest; break;
  }
  return transport;
}

UringTransport::Activation UringTransport::activate(std::size_t kernel_payload_bytes, std::string* why) {
  Impl* p = impl_.get();
  std::string failure;
  if (kernel_payload_bytes > p->options.payload_bytes)
    failure = "the kernel's requests (" + std::to_string(kernel_payload_bytes) + " bytes) exceed the ring's buffers";
  if (failure.empty()) failure = p->post(Command::RegisterOthers);
  if (failure.empty()) failure = p->post(Command::RegisterCompleting);
  if (!failure.empty()) {
    // The ring is incomplete, so nothing was ever handed to it: once the kernel has switched
    // io_uring off for the connection, /dev/fuse carries everything.
    const std::string withdrawn = p->post(Command::Withdraw);
    stop();  // each thread's exit cancels its pending registrations
    *why = failure;
    if (!withdrawn.empty()) {
      *why = failure + "; and io_uring could not be switched off for this mount: " + withdrawn;
      return Activation::Failed;
    }
    return Activation::FellBack;
  }
  // The ring is complete and serving from here on.
  if (std::string late = p->post(Command::RegisterRest); !late.empty())
    log::warning("io_uring: " + late + "; the ring serves with its other entries");
  p->post(Command::Serve);
  return Activation::Serving;
}

void UringTransport::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  for (auto& t : impl_->threads) t->stopping.store(true);
  {
    std::lock_guard lk(impl_->mu);
    impl_->abort = true;  // threads still starting up leave
    impl_->cv.notify_all();
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->wake_fd, &one, sizeof one);
  for (auto& t : impl_->threads)
    if (t->thread.joinable()) t->thread.join();
}

UringTransport::~UringTransport() {
  stop();
  // Each thread's io_uring_queue_exit cancels the kernel's hold on its entries before their
  // memory goes (RingThread's destructor runs before its members').
  impl_->threads.clear();
}

std::string UringTransport::description() const {
  std::size_t entries = 0;
  for (const auto& t : impl_->threads)
    entries += static_cast<std::size_t>(std::count_if(t->entries.begin(), t->entries.end(), [](const auto& e) { return e->live; }));
  return std::to_string(impl_->queues) + " CPU queues served by " + std::to_string(impl_->threads.size()) +
         " threads, " + std::to_string(entries) + " entries of " + std::to_string(impl_->options.payload_bytes >> 10) +
         " KiB; threads pinned to their CPU, but while they serve readahead READs of " +
         std::to_string(kStreamReadMinBytes >> 10) + " KiB or more";
}

unsigned possible_cpu_count_from(const std::string& list) {
  unsigned count = 0;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
    if (part.empty()) continue;
    unsigned a = 0, b = 0;
    char dash = 0;
    std::istringstream ps(part);
    if (!(ps >> a)) return 0;
    if (ps >> dash) {
      if (dash != '-' || !(ps >> b) || b < a) return 0;
    } else {
      b = a;
    }
    count += b - a + 1;
  }
  return count;
}

unsigned possible_cpu_count() {
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string line;
  if (!std::getline(in, line)) return 0;
  return possible_cpu_count_from(line);
}

}  // namespace gcfs::mount
