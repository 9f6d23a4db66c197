// How serving starts, on both transports, where what it needs cannot be had: what fails comes back
// as one line, with every thread joined and nothing leaked; it never ends the process, which would
// leave a dead mount behind.
//   - the io_uring transport (mount/transport/uring_transport.h): prepare() builds real rings, registering a
//     plain descriptor where /dev/fuse would be, so it runs without a mount (no memory for the
//     entries' buffers, a thread's preparation throwing);
//   - the classic request loop (mount/transport/request_loop.h), on a session that is never mounted: no
//     worker can get its buffer, so none serves, and the loop says so instead of reporting ready.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <gtest/gtest.h>
#include <new>
#include <stdexcept>
#include <string>

#include "mount/fuse_api.h"
#include "mount/transport/request_loop.h"
#include "mount/transport/uring_transport.h"

namespace gcfs::mount {
namespace {

// A descriptor to register in the rings' place of /dev/fuse: prepare() submits nothing on it.
struct Devnull {
  Devnull() : fd(::open("/dev/null", O_RDWR | O_CLOEXEC)) {}
  ~Devnull() {
    if (fd >= 0) ::close(fd);
  }
  int fd;
};

// Where this kernel refuses io_uring altogether, prepare() fails before it gets to the buffers.
#define SKIP_WITHOUT_IO_URING(why)                                                                 \
  if ((why).rfind("cannot create an io_uring", 0) == 0) GTEST_SKIP() << "no io_uring here: " << (why)

// Rings small enough to build quickly: four threads, 64 KiB entries.
UringOptions small_rings() {
  UringOptions o;
  o.max_threads = 4;
  o.payload_bytes = 64 << 10;
  return o;
}

TEST(UringTransportStart, BuffersThatCannotBeHadAreAReasonNotACrash) {
  Devnull dev;
  ASSERT_GE(dev.fd, 0);
  UringOptions o = small_rings();
  std::atomic<int> asked{0};
  o.allocate_buffer = [&](std::size_t) -> HostBuffer {
    ++asked;
    throw std::bad_alloc();
  };
  std::string why;
  auto t = UringTransport::prepare(nullptr, dev.fd, o, &why);
  SKIP_WITHOUT_IO_URING(why);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(why.find("no memory for the ring entries' buffers"), std::string::npos) << why;
  EXPECT_GE(asked.load(), 1);
}

TEST(UringTransportStart, AThreadsPreparationThrowingIsAReason) {
  Devnull dev;
  ASSERT_GE(dev.fd, 0);
  UringOptions o = small_rings();
  o.on_worker_start = [] { throw std::runtime_error("engine refused the thread"); };
  std::string why;
  auto t = UringTransport::prepare(nullptr, dev.fd, o, &why);
  SKIP_WITHOUT_IO_URING(why);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(why.find("engine refused the thread"), std::string::npos) << why;
}

TEST(UringTransportStart, PreparedRingsAreReleasedWithoutActivation) {
  // The path of a mount whose INIT did not ask for io_uring: built, never registered, dropped.
  Devnull dev;
  ASSERT_GE(dev.fd, 0);
  UringOptions o = small_rings();
  std::atomic<int> buffers{0};
  o.allocate_buffer = [&](std::size_t n) {
    ++buffers;
    return HostBuffer::plain(n);
  };
  std::string why;
  auto t = UringTransport::prepare(nullptr, dev.fd, o, &why);
  SKIP_WITHOUT_IO_URING(why);
  ASSERT_NE(t, nullptr) << why;
  EXPECT_GE(buffers.load(), 4);  // one entry per thread, at least two threads per CPU queue
  t.reset();                     // joins the threads; the sanitizer pass checks nothing leaks
}

TEST(RequestLoopStart, NoWorkerBufferIsAFailureNotACrash) {
  fuse_lowlevel_ops ops{};
  const char* argv[] = {"gpucryptfs-test", nullptr};
  fuse_args args = FUSE_ARGS_INIT(1, const_cast<char**>(argv));
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, nullptr);
  fuse_opt_free_args(&args);
  ASSERT_NE(se, nullptr);
  RequestLoopOptions o;
  o.threads = 4;
  std::atomic<int> asked{0};
  o.allocate_buffer = [&](std::size_t) -> HostBuffer {
    ++asked;
    throw std::bad_alloc();
  };
  bool ready = false;
  o.on_ready = [&] { ready = true; };
  std::string failure;
  const int rc = run_request_loop(se, o, &failure);
  fuse_session_destroy(se);
  EXPECT_LT(rc, 0);
  EXPECT_FALSE(ready);  // the parent of a detached mount hears the failure, not "ok"
  EXPECT_EQ(asked.load(), 4);
  EXPECT_NE(failure.find("a request thread could not start"), std::string::npos) << failure;
}

}  // namespace
}  // namespace gcfs::mount
