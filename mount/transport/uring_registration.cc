// The io_uring transport's registration: each serving thread builds its own ring and entries
// (before INIT), and registers them with the kernel in the rounds that activate() drives, so that
// a refusal up to the ring's completion still falls back to /dev/fuse (see Command in
// uring_rings.h).
#include <linux/fuse.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "fs/log.h"
#include "mount/fuse_api.h"
#include "mount/transport/uring_rings.h"

namespace gcfs::mount {
namespace {

// The ring's own descriptor is registered with the thread's io_uring context and closed, so the
// rings cost the daemon no descriptors (a vault's descriptor caches are sized from what is free).
// liburing 2.4 calls this io_uring_close_ring_fd; Debian's 2.3 lacks it, and its
// io_uring_queue_exit then only fails to unregister (the thread's exit released the ring) and
// closes nothing.
void close_ring_fd(io_uring* ring) {
  if (io_uring_register_ring_fd(ring) != 1) return;  // older kernel: keep the descriptor
  ::close(ring->ring_fd);
  ring->ring_fd = -1;
}

}  // namespace

void UringTransport::Impl::prepare_cmd(io_uring_sqe* sqe, RingEntry* e, std::uint32_t cmd) {
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));  // SQE128: the command area is the second half
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->flags = IOSQE_FIXED_FILE;
  sqe->fd = 0;  // index of /dev/fuse among the ring's registered files
  sqe->cmd_op = cmd;
  io_uring_sqe_set_data(sqe, e);
  abi::CmdReq req{};
  req.qid = static_cast<std::uint16_t>(e->qid);
  req.commit_id = cmd == abi::kCmdCommitAndFetch ? e->commit_id : 0;
  std::memcpy(sqe->cmd, &req, sizeof req);
  if (cmd == abi::kCmdRegister) {
    sqe->addr = reinterpret_cast<std::uint64_t>(e->iov);
    sqe->len = 2;
  }
}

// A REGISTER the kernel refuses whatever the connection's state: no iovec at all (it wants
// exactly two). Its user data is `tag`.
void UringTransport::Impl::prepare_malformed_register(io_uring_sqe* sqe, unsigned qid, void* tag) {
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->flags = IOSQE_FIXED_FILE;
  sqe->cmd_op = abi::kCmdRegister;
  io_uring_sqe_set_data(sqe, tag);
  abi::CmdReq req{};
  req.qid = static_cast<std::uint16_t>(qid);
  std::memcpy(sqe->cmd, &req, sizeof req);
}

// Creates a ring of `sqes` entries with /dev/fuse registered; "" or why not.
std::string UringTransport::Impl::make_ring(RingThread& r, unsigned sqes) {
  // Only the ring's own thread, which creates it here, submits on it: the kernel may then run an
  // entry's completion work (copying the next request in) when that thread next waits, instead
  // of interrupting it wherever it runs (measured, 1-stream read: 1403-1492 MB/s against
  // 1317-1402 without). A kernel that refuses it gets the ring without.
  io_uring_params params{};
  params.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  params.cq_entries = 2 * sqes;
  int rc = io_uring_queue_init_params(sqes, &r.ring, &params);
  if (rc == -EINVAL) {
    params = io_uring_params{};
    params.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE;
    params.cq_entries = 2 * sqes;
    rc = io_uring_queue_init_params(sqes, &r.ring, &params);
  }
  if (rc < 0) return std::string("cannot create an io_uring: ") + std::strerror(-rc);
  r.ring_ready = true;
  rc = io_uring_register_files(&r.ring, &fuse_fd, 1);
  if (rc < 0) return std::string("cannot register /dev/fuse with the io_uring: ") + std::strerror(-rc);
  return "";
}

// Builds one thread's ring and its entries (nothing is submitted yet); "" or why not.
std::string UringTransport::Impl::build(RingThread& t) {
  const unsigned depth = queue_depth(options.payload_bytes);
  // Its entries and the stop poll.
  if (std::string why = make_ring(t, depth * static_cast<unsigned>(t.cpus.size()) + 1); !why.empty()) return why;
  const std::size_t bytes = kRingPrefixBytes + options.payload_bytes;
  for (unsigned cpu : t.cpus) {
    for (unsigned i = 0; i < depth; ++i) {
      auto e = std::make_unique<RingEntry>(&t.charge);
      e->qid = cpu;
      try {
        e->memory = options.allocate_buffer ? options.allocate_buffer(bytes) : HostBuffer::plain(bytes);
      } catch (const std::bad_alloc&) {
        return "no memory for the ring entries' buffers (" + std::to_string(bytes >> 10) + " KiB each)";
      } catch (const std::exception& ex) {
        return "no memory for the ring entries' buffers (" + std::to_string(bytes >> 10) + " KiB each): " + ex.what();
      }
      e->payload = e->memory.data() + kRingPrefixBytes;
      e->payload_bytes = options.payload_bytes;
      e->iov[0] = {e->header.get(), sizeof(abi::ReqHeader)};
      e->iov[1] = {e->payload, e->payload_bytes};
      t.entries.push_back(std::move(e));
    }
  }
  close_ring_fd(&t.ring);
  return "";
}

// Registers the thread's entries that `pick` selects; "" or why one was refused. A refusal
// completes at once (the kernel checks a REGISTER while it is submitted); an accepted entry
// stays pending until a request comes for it, and is marked live.
template <typename Pick>
std::string UringTransport::Impl::register_entries(RingThread& t, Pick pick) {
  unsigned count = 0;
  for (auto& e : t.entries) count += pick(*e) ? 1 : 0;
  // Room for all of them first: half a round left queued would go out with a later submit.
  if (count > io_uring_sq_space_left(&t.ring)) return "io_uring submission queue full while registering";
  for (auto& e : t.entries) {
    if (!pick(*e)) continue;
    io_uring_sqe* sqe = io_uring_get_sqe(&t.ring);
    if (!sqe) return "io_uring submission queue full while registering";  // cannot happen: room was checked
    prepare_cmd(sqe, e.get(), abi::kCmdRegister);
    if (e.get() == refused_for_test) sqe->len = 0;  // the kernel wants two iovecs: refused
    e->live = true;
  }
  if (count == 0) return "";
  const int rc = io_uring_submit(&t.ring);
  if (rc < 0) {
    for (auto& e : t.entries)
      if (pick(*e)) e->live = false;
    return std::string("io_uring submit: ") + std::strerror(-rc);
  }
  std::string why;
  io_uring_cqe* cqe = nullptr;
  unsigned head = 0, seen = 0;
  io_uring_for_each_cqe(&t.ring, head, cqe) {
    ++seen;
    auto* e = static_cast<RingEntry*>(io_uring_cqe_get_data(cqe));
    if (e && cqe->res < 0 && pick(*e) && e->commit_id == 0) {
      e->live = false;
      if (why.empty())
        why = "the kernel refused a ring entry's registration (queue " + std::to_string(e->qid) +
              "): " + std::strerror(-cqe->res);
    } else {
      t.early.emplace_back(e, cqe->res);
    }
  }
  io_uring_cq_advance(&t.ring, seen);
  return why;
}

// Makes sure the kernel has switched io_uring off for this connection, with a REGISTER it
// refuses (any refusal does: see above). "" once it has; else why not.
std::string UringTransport::Impl::withdraw(RingThread& t) {
  io_uring_sqe* sqe = io_uring_get_sqe(&t.ring);
  if (!sqe) return "io_uring submission queue full";
  prepare_malformed_register(sqe, t.cpus.front(), &withdraw_tag);
  const int rc = io_uring_submit(&t.ring);
  if (rc < 0) return std::string("io_uring submit: ") + std::strerror(-rc);
  int res = 1;
  io_uring_cqe* cqe = nullptr;
  unsigned head = 0, seen = 0;
  io_uring_for_each_cqe(&t.ring, head, cqe) {
    ++seen;
    if (io_uring_cqe_get_data(cqe) == &withdraw_tag) res = cqe->res;
    else t.early.emplace_back(static_cast<RingEntry*>(io_uring_cqe_get_data(cqe)), cqe->res);
  }
  io_uring_cq_advance(&t.ring, seen);
  if (res > 0) return "the kernel did not answer the REGISTER that switches io_uring off";
  if (res == 0) return "the kernel accepted a malformed REGISTER";
  return "";
}

std::string UringTransport::Impl::act(RingThread& t, Command c) {
  switch (c) {
    case Command::RegisterOthers:
      return register_entries(t, [&](const RingEntry& e) { return e.qid != last_queue; });
    case Command::RegisterCompleting:
      return register_entries(t, [&](const RingEntry& e) { return &e == completing; });
    case Command::RegisterRest:
      return register_entries(t, [&](const RingEntry& e) { return e.qid == last_queue && &e != completing; });
    case Command::Withdraw:
      return &t == threads.front().get() ? withdraw(t) : std::string();
    case Command::None:
    case Command::Serve:
      break;
  }
  return "";
}

}  // namespace gcfs::mount
