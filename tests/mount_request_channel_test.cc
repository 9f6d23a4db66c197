// The seam between the transports and the per-op code (mount/transport/request_channel.h,
// dispatch_request in mount/transport/session_io.h), on a real libfuse session that is never
// mounted: requests are handed over as a transport would, and what comes back is looked at.
//   - a reply libfuse builds for a request on a channel of its own (an io_uring entry) reaches
//     that channel with the request's own unique, and the request's bytes are left as they came;
//   - one on a /dev/fuse channel (the classic loop) goes to the session's descriptor instead;
//   - a READ answered without libfuse is built in the channel's reply room and sent through it;
//   - a WRITE whose caller lacks CAP_FSETID reaches its handler marked so, through fi alone.
#include <fcntl.h>
#include <linux/fuse.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "mount/fuse_api.h"
#include "mount/transport/request_channel.h"
#include "mount/transport/session_io.h"

namespace gcfs::mount {
namespace {

// A channel that keeps what is sent through it.
class RecordingChannel final : public RequestChannel {
 public:
  explicit RecordingChannel(bool to_dev_fuse) : RequestChannel(to_dev_fuse, &charge_) {}
  long send_reply(const iovec* iov, int count) override {
    fuse_out_header out;
    std::memcpy(&out, iov[0].iov_base, sizeof out);
    replies.push_back(out);
    std::string body;
    long bytes = 0;
    for (int i = 0; i < count; ++i) {
      if (i > 0) {
        body.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
        body_in_room = iov[i].iov_base == room;
      }
      bytes += static_cast<long>(iov[i].iov_len);
    }
    bodies.push_back(body);
    return bytes;
  }
  unsigned char* reply_room(std::size_t* bytes) override {
    *bytes = sizeof room;
    return room;
  }

  std::vector<fuse_out_header> replies;
  std::vector<std::string> bodies;
  unsigned char room[4096]{};
  bool body_in_room = false;

 private:
  CallerCharge charge_;
};

// What the test's write handler saw.
bool g_write_seen = false;
bool g_write_kills_suidgid = false;

void test_write(fuse_req_t req, fuse_ino_t, const char*, std::size_t size, off_t, fuse_file_info* fi) {
  g_write_seen = true;
  g_write_kills_suidgid = write_kills_suidgid(fi);
  fuse_reply_write(req, size);
}

long test_direct_read(void*, std::uint64_t, std::uint64_t off, std::size_t size, unsigned char* room,
                      std::size_t room_bytes, const unsigned char** data) {
  if (!room || room_bytes < size) return -EIO;
  for (std::size_t i = 0; i < size; ++i) room[i] = static_cast<unsigned char>('a' + (off + i) % 26);
  *data = room;
  return static_cast<long>(size);
}

// An unmounted session whose replies to /dev/fuse land in a pipe.
class SeamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ops_.write = test_write;
    const char* argv[] = {"gpucryptfs-test", nullptr};
    fuse_args args = FUSE_ARGS_INIT(1, const_cast<char**>(argv));
    se_ = fuse_session_new(&args, &ops_, sizeof ops_, nullptr);
    fuse_opt_free_args(&args);
    ASSERT_NE(se_, nullptr);
    ASSERT_EQ(::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK), 0);
    g_write_seen = g_write_kills_suidgid = false;
  }
  void TearDown() override {
    if (se_) fuse_session_destroy(se_);  // closes pipe_[1], the session's descriptor
    ::close(pipe_[0]);
  }
  void install(const SessionIoOptions& o = {}) { ASSERT_EQ(install_session_io(se_, pipe_[1], o), 0); }

  // A request as /dev/fuse delivers it: the header, then `arg`, then `data`.
  template <typename Arg>
  static std::vector<unsigned char> request(std::uint32_t opcode, std::uint64_t unique, const Arg& arg,
                                            const std::string& data = "") {
    fuse_in_header in{};
    in.len = static_cast<std::uint32_t>(sizeof in + sizeof arg + data.size());
    in.opcode = opcode;
    in.unique = unique;
    in.nodeid = FUSE_ROOT_ID;
    std::vector<unsigned char> bytes(in.len);
    std::memcpy(bytes.data(), &in, sizeof in);
    std::memcpy(bytes.data() + sizeof in, &arg, sizeof arg);
    std::memcpy(bytes.data() + sizeof in + sizeof arg, data.data(), data.size());
    return bytes;
  }
  void dispatch(std::vector<unsigned char>& bytes, RequestChannel& channel) {
    fuse_buf buf{};
    buf.mem = bytes.data();
    buf.size = bytes.size();
    dispatch_request(se_, buf, channel);
  }
  // The reply headers that went to the session's descriptor.
  std::vector<fuse_out_header> dev_fuse_replies() {
    std::vector<fuse_out_header> out;
    unsigned char buf[8192];
    for (;;) {
      const ssize_t n = ::read(pipe_[0], buf, sizeof buf);
      if (n <= 0) break;
      for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(fuse_out_header)) <= n;) {
        fuse_out_header h;
        std::memcpy(&h, buf + at, sizeof h);
        out.push_back(h);
        if (h.len < sizeof h) break;
        at += h.len;
      }
    }
    return out;
  }
  // INIT through a /dev/fuse channel, as the daemon answers it before anything else.
  void answer_init() {
    fuse_init_in init{};
    init.major = FUSE_KERNEL_VERSION;
    init.minor = 31;
    init.max_readahead = 1u << 20;
    auto bytes = request(FUSE_INIT, 2, init);
    RecordingChannel dev_fuse(true);
    dispatch(bytes, dev_fuse);
    const auto replies = dev_fuse_replies();
    ASSERT_EQ(replies.size(), 1u);
    ASSERT_EQ(replies[0].error, 0);
    ASSERT_TRUE(init_outcome().answered);
  }

  fuse_lowlevel_ops ops_{};
  fuse_session* se_ = nullptr;
  int pipe_[2] = {-1, -1};
};

TEST_F(SeamTest, AReplyLibfuseBuildsGoesToTheRequestsOwnChannel) {
  install();
  fuse_getattr_in arg{};
  auto bytes = request(FUSE_GETATTR, 1234, arg);
  const auto as_it_came = bytes;
  RecordingChannel ring(false);
  dispatch(bytes, ring);  // before INIT: libfuse answers EIO, through the channel
  ASSERT_EQ(ring.replies.size(), 1u);
  EXPECT_EQ(ring.replies[0].unique, 1234u);
  EXPECT_EQ(ring.replies[0].error, -EIO);
  EXPECT_EQ(bytes, as_it_came);  // the request's unique is its own again
  EXPECT_TRUE(dev_fuse_replies().empty());
}

TEST_F(SeamTest, AReplyOnADevFuseChannelGoesToTheSessionsDescriptor) {
  install();
  fuse_getattr_in arg{};
  auto bytes = request(FUSE_GETATTR, 5678, arg);
  RecordingChannel classic(true);
  dispatch(bytes, classic);
  EXPECT_TRUE(classic.replies.empty());
  const auto replies = dev_fuse_replies();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].unique, 5678u);
  EXPECT_EQ(replies[0].error, -EIO);
}

TEST_F(SeamTest, ADirectReadIsBuiltInTheChannelsRoomAndSentThroughIt) {
  SessionIoOptions o;
  o.direct_read = test_direct_read;
  install(o);
  fuse_read_in arg{};
  arg.offset = 3;
  arg.size = 5;
  auto bytes = request(FUSE_READ, 42, arg);
  RecordingChannel ring(false);
  dispatch(bytes, ring);
  ASSERT_EQ(ring.replies.size(), 1u);
  EXPECT_EQ(ring.replies[0].unique, 42u);
  EXPECT_EQ(ring.replies[0].error, 0);
  EXPECT_EQ(ring.replies[0].len, sizeof(fuse_out_header) + 5);
  EXPECT_EQ(ring.bodies[0], "defgh");
  EXPECT_TRUE(ring.body_in_room);  // no copy on our side
}

TEST_F(SeamTest, AWriteThatKillsTheSetidBitsReachesItsHandlerMarked) {
  install();
  answer_init();
  for (const bool kill : {true, false}) {
    fuse_write_in arg{};
    arg.size = 3;
    arg.flags = O_WRONLY | (kill ? 0 : kWriteKillsSuidgidMark);  // a stray mark is cleared
    arg.write_flags = kill ? FUSE_WRITE_KILL_SUIDGID : 0;
    auto bytes = request(FUSE_WRITE, kill ? 10 : 12, arg, "abc");
    RecordingChannel ring(false);
    g_write_seen = false;
    dispatch(bytes, ring);
    ASSERT_TRUE(g_write_seen);
    EXPECT_EQ(g_write_kills_suidgid, kill);
    ASSERT_EQ(ring.replies.size(), 1u);
    EXPECT_EQ(ring.replies[0].unique, kill ? 10u : 12u);
    EXPECT_EQ(ring.replies[0].error, 0);
  }
}

TEST(WriteKillsSuidgidMark, OnlyAWriteLongEnoughIsTouched) {
  fuse_in_header in{};
  fuse_write_in w{};
  w.write_flags = FUSE_WRITE_KILL_SUIDGID;
  in.opcode = FUSE_WRITE;
  in.len = sizeof in + sizeof w;
  unsigned char bytes[sizeof in + sizeof w];
  std::memcpy(bytes, &in, sizeof in);
  std::memcpy(bytes + sizeof in, &w, sizeof w);
  mark_write_kills_suidgid(bytes, sizeof bytes);
  fuse_write_in seen;
  std::memcpy(&seen, bytes + sizeof in, sizeof seen);
  EXPECT_EQ(seen.flags & kWriteKillsSuidgidMark, kWriteKillsSuidgidMark);
  EXPECT_EQ(seen.write_flags, FUSE_WRITE_KILL_SUIDGID);  // the rest as it came

  unsigned char short_copy[sizeof bytes];
  std::memcpy(short_copy, bytes, sizeof bytes);
  std::memcpy(bytes + sizeof in, &w, sizeof w);  // unmarked again
  std::memcpy(short_copy, bytes, sizeof bytes);
  mark_write_kills_suidgid(short_copy, sizeof in + offsetof(fuse_write_in, flags));  // flags not there
  EXPECT_EQ(std::memcmp(short_copy, bytes, sizeof bytes), 0);

  in.opcode = FUSE_READ;  // not a WRITE: left alone
  std::memcpy(bytes, &in, sizeof in);
  std::memcpy(short_copy, bytes, sizeof bytes);
  mark_write_kills_suidgid(bytes, sizeof bytes);
  EXPECT_EQ(std::memcmp(short_copy, bytes, sizeof bytes), 0);
}

TEST(WriteKillsSuidgidMark, IsNoOpenFlagAFileKeeps) {
  // The kernel clears O_EXCL from a file's flags once it is open, so a WRITE never carries it.
  EXPECT_EQ(kWriteKillsSuidgidMark, static_cast<std::uint32_t>(O_EXCL));
  EXPECT_FALSE(write_kills_suidgid(nullptr));
}

}  // namespace
}  // namespace gcfs::mount
