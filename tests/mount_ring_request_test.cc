// The io_uring transport's byte handling without a kernel (mount/transport/ring_request.h,
// mount/transport/transport.h, mount/transport/uring_transport.h): a fetched entry laid out as a /dev/fuse request,
// malformed headers answered with EIO instead of read past their buffers, replies stored into
// the entry, the INIT reply's flags, the small parsers the transport choice rests on, and the
// rewrite that hands FUSE_TMPFILE to libfuse as a marked CREATE (mount/transport/session_io.h).
#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <gtest/gtest.h>
#include <vector>

#include "mount/transport/fuse_tmpfile_abi.h"
#include "mount/transport/ring_request.h"
#include "mount/transport/session_io.h"
#include "mount/transport/transport.h"
#include "mount/transport/uring_transport.h"

namespace gcfs::mount {
namespace {

using uring_abi::ReqHeader;

// One ring entry's memory: prefix room, then the payload.
struct Entry {
  explicit Entry(std::size_t capacity) : memory(kRingPrefixBytes + capacity, 0xee), capacity(capacity) {}
  unsigned char* payload() { return memory.data() + kRingPrefixBytes; }
  std::vector<unsigned char> memory;
  std::size_t capacity;
  ReqHeader header{};

  // What the kernel writes on fetch: in header with `len`, an op header, payload bytes.
  void fetch(std::uint32_t opcode, std::uint64_t unique, std::uint32_t len, const void* op, std::size_t op_bytes,
             std::uint32_t payload_sz) {
    fuse_in_header in{};
    in.len = len;
    in.opcode = opcode;
    in.unique = unique;
    in.nodeid = 7;
    std::memcpy(header.in_out, &in, sizeof in);
    if (op_bytes) std::memcpy(header.op_in, op, op_bytes);
    header.ring_ent_in_out.commit_id = unique;
    header.ring_ent_in_out.payload_sz = payload_sz;
  }
};

TEST(RingRequest, WriteIsLaidOutAsDevFuseDeliversItWithTheDataLeftInPlace) {
  Entry e(1 << 16);
  fuse_write_in w{};
  w.offset = 4096;
  w.size = 5;
  std::memcpy(e.payload(), "hello", 5);
  e.fetch(FUSE_WRITE, 42, sizeof(fuse_in_header) + sizeof w + 5, &w, sizeof w, 5);
  RingRequest r = assemble_ring_request(e.header, e.payload(), e.capacity);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_NE(r.start, nullptr);
  EXPECT_EQ(r.bytes, sizeof(fuse_in_header) + sizeof w + 5);
  EXPECT_EQ(r.opcode, static_cast<std::uint32_t>(FUSE_WRITE));
  EXPECT_EQ(r.unique, 42u);
  // Contiguous: header, op header, and the payload exactly where the kernel put it.
  EXPECT_EQ(r.start + sizeof(fuse_in_header) + sizeof w, e.payload());
  fuse_in_header in;
  std::memcpy(&in, r.start, sizeof in);
  EXPECT_EQ(in.unique, 42u);
  EXPECT_EQ(in.nodeid, 7u);
  fuse_write_in w2;
  std::memcpy(&w2, r.start + sizeof in, sizeof w2);
  EXPECT_EQ(w2.offset, 4096u);
  EXPECT_EQ(std::memcmp(r.start + sizeof in + sizeof w, "hello", 5), 0);
}

TEST(RingRequest, OperationWithoutHeaderOrPayload) {
  Entry e(8192);
  e.fetch(FUSE_STATFS, 9, sizeof(fuse_in_header), nullptr, 0, 0);
  RingRequest r = assemble_ring_request(e.header, e.payload(), e.capacity);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.start + sizeof(fuse_in_header), e.payload());
  EXPECT_EQ(r.bytes, sizeof(fuse_in_header));
}

TEST(RingRequest, MalformedLengthsAreRefusedWithoutTouchingTheBuffer) {
  struct Case {
    const char* what;
    std::uint32_t len;
    std::uint32_t payload_sz;
  };
  const std::size_t cap = 8192;
  const std::uint32_t h = sizeof(fuse_in_header);
  for (const Case& c : {Case{"len shorter than the header", 12, 0}, Case{"len zero", 0, 0},
                        Case{"payload larger than the buffer", h + 16 + cap + 1, cap + 1},
                        Case{"len shorter than header and payload", h + 10, 100},
                        Case{"op header larger than the ring's 128 bytes", h + 129 + 10, 10},
                        Case{"len near 4 GiB", 0xffffffffu, 16}}) {
    Entry e(cap);
    e.fetch(FUSE_WRITE, 5, c.len, nullptr, 0, c.payload_sz);
    const std::vector<unsigned char> before = e.memory;
    RingRequest r = assemble_ring_request(e.header, e.payload(), e.capacity);
    EXPECT_EQ(r.start, nullptr) << c.what;
    EXPECT_FALSE(r.error.empty()) << c.what;
    EXPECT_EQ(e.memory, before) << c.what;
    // The error reply goes to the same request, with no body.
    store_ring_error(&e.header, EIO);
    fuse_out_header out;
    std::memcpy(&out, e.header.in_out, sizeof out);
    EXPECT_EQ(out.error, -EIO) << c.what;
    EXPECT_EQ(out.unique, 5u) << c.what;
    EXPECT_EQ(e.header.ring_ent_in_out.payload_sz, 0u) << c.what;
  }
}

TEST(RingRequest, LargestOpHeaderFits) {
  Entry e(8192);
  unsigned char op[128];
  std::memset(op, 0x5a, sizeof op);
  e.fetch(FUSE_SETATTR, 3, sizeof(fuse_in_header) + 128, op, 128, 0);
  RingRequest r = assemble_ring_request(e.header, e.payload(), e.capacity);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(std::memcmp(r.start + sizeof(fuse_in_header), op, 128), 0);
}

TEST(RingRequest, OnlyLargeReadsThroughThePageCacheAreBulkReads) {
  const std::uint32_t h = sizeof(fuse_in_header);
  auto read_of = [&](std::uint32_t size, std::uint32_t flags, std::uint32_t len) {
    Entry e(8192);
    fuse_read_in r{};
    r.size = size;
    r.flags = flags;
    e.fetch(FUSE_READ, 11, len, &r, sizeof r, 0);
    return is_buffered_read_of(e.header, 256 * 1024);
  };
  EXPECT_TRUE(read_of(1 << 20, O_RDONLY, h + sizeof(fuse_read_in)));  // readahead
  EXPECT_TRUE(read_of(256 * 1024, O_RDWR, h + sizeof(fuse_read_in)));
  EXPECT_FALSE(read_of(256 * 1024 - 1, O_RDONLY, h + sizeof(fuse_read_in)));  // small: its caller waits
  EXPECT_FALSE(read_of(1 << 20, O_RDONLY | O_DIRECT, h + sizeof(fuse_read_in)));  // the caller waits
  EXPECT_FALSE(read_of(1 << 20, O_RDONLY, h + sizeof(fuse_read_in) - 1));  // op header cut short
  EXPECT_FALSE(read_of(1 << 20, O_RDONLY, 12));                               // malformed length

  Entry w(8192);
  fuse_write_in wr{};
  wr.size = 1 << 20;
  w.fetch(FUSE_WRITE, 12, h + sizeof wr, &wr, sizeof wr, 0);
  EXPECT_FALSE(is_buffered_read_of(w.header, 256 * 1024));
}

TEST(RingReply, BodyGoesToThePayloadAndHeaderToInOut) {
  Entry e(4096);
  fuse_out_header out{0, 0, 77};
  char body1[] = "abc", body2[] = "defg";
  iovec iov[3] = {{&out, sizeof out}, {body1, 3}, {body2, 4}};
  const long n = store_ring_reply(iov, 3, &e.header, e.payload(), e.capacity);
  EXPECT_EQ(n, static_cast<long>(sizeof out + 7));
  EXPECT_EQ(e.header.ring_ent_in_out.payload_sz, 7u);
  EXPECT_EQ(std::memcmp(e.payload(), "abcdefg", 7), 0);
  fuse_out_header stored;
  std::memcpy(&stored, e.header.in_out, sizeof stored);
  EXPECT_EQ(stored.unique, 77u);
  EXPECT_EQ(stored.error, 0);
  EXPECT_EQ(stored.len, sizeof out + 7);
}

TEST(RingReply, BodyAlreadyInThePayloadIsNotCopied) {
  Entry e(4096);
  std::memcpy(e.payload(), "xyz", 3);
  fuse_out_header out{0, 0, 1};
  iovec iov[2] = {{&out, sizeof out}, {e.payload(), 3}};
  EXPECT_GT(store_ring_reply(iov, 2, &e.header, e.payload(), e.capacity), 0);
  EXPECT_EQ(e.header.ring_ent_in_out.payload_sz, 3u);
  EXPECT_EQ(std::memcmp(e.payload(), "xyz", 3), 0);
}

TEST(RingReply, TooLargeOrOddRepliesBecomeEio) {
  Entry e(16);
  fuse_out_header out{0, 0, 8};
  std::vector<char> big(17, 'b');
  iovec iov[2] = {{&out, sizeof out}, {big.data(), big.size()}};
  EXPECT_GT(store_ring_reply(iov, 2, &e.header, e.payload(), e.capacity), 0);
  fuse_out_header stored;
  std::memcpy(&stored, e.header.in_out, sizeof stored);
  EXPECT_EQ(stored.error, -EIO);
  EXPECT_EQ(stored.unique, 8u);
  EXPECT_EQ(e.header.ring_ent_in_out.payload_sz, 0u);

  fuse_out_header positive{0, 5, 8};  // the kernel refuses a positive error: never send one
  iovec iov2[1] = {{&positive, sizeof positive}};
  store_ring_reply(iov2, 1, &e.header, e.payload(), e.capacity);
  std::memcpy(&stored, e.header.in_out, sizeof stored);
  EXPECT_EQ(stored.error, -EIO);

  char tiny[4] = {};
  iovec iov3[1] = {{tiny, sizeof tiny}};
  EXPECT_EQ(store_ring_reply(iov3, 1, &e.header, e.payload(), e.capacity), -1);
  EXPECT_EQ(store_ring_reply(iov3, 0, &e.header, e.payload(), e.capacity), -1);
}

std::vector<unsigned char> init_request(std::uint32_t minor, std::uint32_t flags, std::uint32_t flags2) {
  std::vector<unsigned char> b(sizeof(fuse_in_header) + sizeof(fuse_init_in));
  fuse_in_header in{};
  in.len = static_cast<std::uint32_t>(b.size());
  in.opcode = FUSE_INIT;
  in.unique = 2;
  fuse_init_in init{};
  init.major = 7;
  init.minor = minor;
  init.flags = flags;
  init.flags2 = flags2;
  std::memcpy(b.data(), &in, sizeof in);
  std::memcpy(b.data() + sizeof in, &init, sizeof init);
  return b;
}

TEST(RingInit, OfferIsReadFromFlags2) {
  const std::uint32_t bit = static_cast<std::uint32_t>(uring_abi::kFuseOverIoUring >> 32);
  EXPECT_TRUE(init_offers_uring(init_request(42, FUSE_INIT_EXT, bit).data(), sizeof(fuse_in_header) + sizeof(fuse_init_in)));
  EXPECT_FALSE(init_offers_uring(init_request(42, FUSE_INIT_EXT, 0).data(), sizeof(fuse_in_header) + sizeof(fuse_init_in)));
  EXPECT_FALSE(init_offers_uring(init_request(42, 0, bit).data(), sizeof(fuse_in_header) + sizeof(fuse_init_in)));
  auto r = init_request(42, FUSE_INIT_EXT, bit);
  EXPECT_FALSE(init_offers_uring(r.data(), r.size() - 1));  // truncated
}

TEST(RingInit, ReplyAsksForUringAndLargerRequests) {
  fuse_init_out out{};
  out.major = 7;
  out.minor = 38;
  out.flags = FUSE_MAX_PAGES | FUSE_INIT_EXT;
  out.max_write = 1u << 20;
  out.max_pages = 256;
  out.max_readahead = 1u << 20;
  ASSERT_TRUE(patch_init_reply(&out, sizeof out, true, 4u << 20));
  EXPECT_EQ(out.flags2 & (uring_abi::kFuseOverIoUring >> 32), uring_abi::kFuseOverIoUring >> 32);
  EXPECT_EQ(out.max_write, 4u << 20);
  EXPECT_EQ(out.max_pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), std::size_t{4} << 20);
  EXPECT_EQ(out.max_readahead, 4u << 20);

  fuse_init_out plain{};
  plain.flags = FUSE_MAX_PAGES;
  plain.max_write = 1u << 20;
  ASSERT_TRUE(patch_init_reply(&plain, sizeof plain, false, 1u << 20));
  EXPECT_EQ(plain.flags2, 0u);
  EXPECT_EQ(plain.max_write, 1u << 20);

  EXPECT_FALSE(patch_init_reply(&plain, 24, true, 0));  // a pre-7.23 reply is left alone
}

TEST(RingInit, KillprivV2OfferIsReadFromFlagsFrom733On) {
  const std::size_t n = sizeof(fuse_in_header) + sizeof(fuse_init_in);
  EXPECT_TRUE(init_offers_killpriv_v2(init_request(33, FUSE_HANDLE_KILLPRIV_V2, 0).data(), n));
  EXPECT_TRUE(init_offers_killpriv_v2(init_request(45, FUSE_HANDLE_KILLPRIV_V2 | FUSE_INIT_EXT, 0).data(), n));
  EXPECT_FALSE(init_offers_killpriv_v2(init_request(45, FUSE_HANDLE_KILLPRIV, 0).data(), n));
  EXPECT_FALSE(init_offers_killpriv_v2(init_request(32, FUSE_HANDLE_KILLPRIV_V2, 0).data(), n));  // before the flag
  // An INIT of an old kernel is shorter (no flags2): its flags are read all the same.
  const auto old = init_request(33, FUSE_HANDLE_KILLPRIV_V2, 0);
  EXPECT_TRUE(init_offers_killpriv_v2(old.data(), sizeof(fuse_in_header) + 16));
  EXPECT_FALSE(init_offers_killpriv_v2(old.data(), sizeof(fuse_in_header) + 15));
  auto other = init_request(45, FUSE_HANDLE_KILLPRIV_V2, 0);
  other[offsetof(fuse_in_header, opcode)] = FUSE_WRITE;
  EXPECT_FALSE(init_offers_killpriv_v2(other.data(), n));
}

TEST(RingInit, ReplyAsksForKillprivV2OnlyWhenTold) {
  fuse_init_out out{};
  out.flags = FUSE_MAX_PAGES | FUSE_HANDLE_KILLPRIV;
  out.max_write = 1u << 20;
  ASSERT_TRUE(patch_init_reply(&out, sizeof out, false, 1u << 20, true));
  EXPECT_EQ(out.flags, static_cast<std::uint32_t>(FUSE_MAX_PAGES | FUSE_HANDLE_KILLPRIV | FUSE_HANDLE_KILLPRIV_V2));
  fuse_init_out plain{};
  plain.flags = FUSE_MAX_PAGES;
  ASSERT_TRUE(patch_init_reply(&plain, sizeof plain, true, 1u << 20));
  EXPECT_EQ(plain.flags & FUSE_HANDLE_KILLPRIV_V2, 0u);
}

std::vector<unsigned char> write_request(std::uint32_t write_flags, std::uint32_t data_bytes) {
  std::vector<unsigned char> b(sizeof(fuse_in_header) + sizeof(fuse_write_in) + data_bytes, 0x5a);
  fuse_in_header in{};
  in.len = static_cast<std::uint32_t>(b.size());
  in.opcode = FUSE_WRITE;
  in.unique = 9;
  fuse_write_in w{};
  w.size = data_bytes;
  w.write_flags = write_flags;
  std::memcpy(b.data(), &in, sizeof in);
  std::memcpy(b.data() + sizeof in, &w, sizeof w);
  return b;
}

TEST(RingWrite, WriteFlagsAreReadFromTheWriteHeaderOnly) {
  constexpr std::uint32_t kFlags = FUSE_WRITE_KILL_SUIDGID | FUSE_WRITE_LOCKOWNER;
  auto w = write_request(kFlags, 4096);
  EXPECT_EQ(write_flags_of(w.data(), w.size()), kFlags);
  auto plain = write_request(0, 10);
  EXPECT_EQ(write_flags_of(plain.data(), plain.size()), 0u);
  // Cut off before the flags end: nothing read past what came.
  constexpr std::size_t flags_end = sizeof(fuse_in_header) + offsetof(fuse_write_in, write_flags) + 4;
  EXPECT_EQ(write_flags_of(w.data(), flags_end - 1), 0u);
  EXPECT_EQ(write_flags_of(w.data(), flags_end), kFlags);
  // A header whose own length stops short of the flags counts as none.
  fuse_in_header in{};
  std::memcpy(&in, w.data(), sizeof in);
  in.len = static_cast<std::uint32_t>(flags_end - 1);
  std::memcpy(w.data(), &in, sizeof in);
  EXPECT_EQ(write_flags_of(w.data(), w.size()), 0u);
  // Another opcode with the same bytes where a WRITE keeps its flags.
  auto read = write_request(FUSE_WRITE_KILL_SUIDGID, 0);
  in.len = static_cast<std::uint32_t>(read.size());
  in.opcode = FUSE_READ;
  std::memcpy(read.data(), &in, sizeof in);
  EXPECT_EQ(write_flags_of(read.data(), read.size()), 0u);
  EXPECT_EQ(write_flags_of(nullptr, 100), 0u);
}

TEST(Transport, ParsesItsChoices) {
  EXPECT_EQ(parse_transport("auto"), Transport::Auto);
  EXPECT_EQ(parse_transport("uring"), Transport::Uring);
  EXPECT_EQ(parse_transport("classic"), Transport::Classic);
  EXPECT_ANY_THROW(parse_transport("io_uring"));
  EXPECT_ANY_THROW(parse_transport(""));
}

TEST(Transport, ReasonFollowsTheKernelSwitch) {
  char dir[] = "/tmp/gcfs-switch.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/enable_uring";
  EXPECT_NE(uring_unavailable_reason(path).find("no FUSE over io_uring"), std::string::npos);
  std::ofstream(path) << "N\n";
  EXPECT_NE(uring_unavailable_reason(path).find("io_uring is off in this kernel: echo 1 > " + path), std::string::npos);
  std::ofstream(path) << "Y\n";
  EXPECT_EQ(uring_unavailable_reason(path), "");
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST(Transport, LargestRequestFollowsMaxPagesLimit) {
  EXPECT_EQ(max_request_bytes_for(256, 4096), std::size_t{1} << 20);
  EXPECT_EQ(max_request_bytes_for(0, 4096), std::size_t{1} << 20);      // unreadable
  EXPECT_EQ(max_request_bytes_for(32, 4096), std::size_t{1} << 20);     // the kernel caps below us
  EXPECT_EQ(max_request_bytes_for(512, 4096), std::size_t{2} << 20);
  EXPECT_EQ(max_request_bytes_for(65535, 4096), std::size_t{4} << 20);  // our ceiling
}

TEST(Transport, CountsPossibleCpus) {
  EXPECT_EQ(possible_cpu_count_from("0-1\n"), 2u);
  EXPECT_EQ(possible_cpu_count_from("0"), 1u);
  EXPECT_EQ(possible_cpu_count_from("0-3,8-11"), 8u);
  EXPECT_EQ(possible_cpu_count_from("0,2,4"), 3u);
  EXPECT_EQ(possible_cpu_count_from("3-1"), 0u);
  EXPECT_EQ(possible_cpu_count_from("x"), 0u);
  EXPECT_GE(possible_cpu_count(), 1u);
}


// FUSE_TMPFILE (opcode 51, which libfuse 3.14 answers with ENOSYS) becomes a CREATE marked with
// __O_TMPFILE before libfuse parses it; a real CREATE never carries the mark.
std::vector<unsigned char> create_like_request(std::uint32_t opcode, std::uint32_t flags, const char* name) {
  fuse_in_header in{};
  fuse_create_in c{};
  c.flags = flags;
  c.mode = S_IFREG | 0644;
  c.umask = 022;
  const std::size_t name_bytes = std::strlen(name) + 1;
  in.len = static_cast<std::uint32_t>(sizeof in + sizeof c + name_bytes);
  in.opcode = opcode;
  in.unique = 42;
  in.nodeid = 1;
  std::vector<unsigned char> b(in.len);
  std::memcpy(b.data(), &in, sizeof in);
  std::memcpy(b.data() + sizeof in, &c, sizeof c);
  std::memcpy(b.data() + sizeof in + sizeof c, name, name_bytes);
  return b;
}

fuse_in_header header_of(const std::vector<unsigned char>& b) {
  fuse_in_header in{};
  if (b.size() >= sizeof in) std::memcpy(&in, b.data(), sizeof in);
  return in;
}

fuse_create_in create_of(const std::vector<unsigned char>& b) {
  fuse_create_in c{};
  if (b.size() >= sizeof(fuse_in_header) + sizeof c) std::memcpy(&c, b.data() + sizeof(fuse_in_header), sizeof c);
  return c;
}

TEST(TmpfileRequest, BecomesACreateMarkedWithOTmpfile) {
  static_assert(tmpfile_abi::kFuseTmpfile == 51);
  auto b = create_like_request(tmpfile_abi::kFuseTmpfile, O_TMPFILE | O_RDWR, "/");
  const auto before = b;
  ASSERT_TRUE(rewrite_tmpfile_as_create(b.data(), b.size()));
  EXPECT_EQ(header_of(b).opcode, static_cast<std::uint32_t>(FUSE_CREATE));
  EXPECT_EQ(header_of(b).unique, 42u);  // the reply goes to the same request
  EXPECT_EQ(header_of(b).len, header_of(before).len);
  EXPECT_TRUE(create_of(b).flags & __O_TMPFILE);
  EXPECT_EQ(create_of(b).flags & O_ACCMODE, static_cast<std::uint32_t>(O_RDWR));
  EXPECT_EQ(create_of(b).mode, create_of(before).mode);
  EXPECT_EQ(create_of(b).umask, 022u);
  // The name and everything after the two headers is untouched.
  EXPECT_TRUE(std::equal(b.begin() + sizeof(fuse_in_header) + sizeof(fuse_create_in), b.end(),
                         before.begin() + sizeof(fuse_in_header) + sizeof(fuse_create_in)));
  // Marked even where the kernel's flags lacked the bit (the opcode is what says it).
  auto bare = create_like_request(tmpfile_abi::kFuseTmpfile, O_WRONLY, "/");
  ASSERT_TRUE(rewrite_tmpfile_as_create(bare.data(), bare.size()));
  EXPECT_TRUE(create_of(bare).flags & __O_TMPFILE);
}

TEST(TmpfileRequest, ARealCreateLosesAnyTmpfileMark) {
  auto b = create_like_request(FUSE_CREATE, O_RDWR | O_EXCL | __O_TMPFILE, "name");
  EXPECT_FALSE(rewrite_tmpfile_as_create(b.data(), b.size()));
  EXPECT_EQ(header_of(b).opcode, static_cast<std::uint32_t>(FUSE_CREATE));
  EXPECT_EQ(create_of(b).flags, static_cast<std::uint32_t>(O_RDWR | O_EXCL));
  // Even one cut right after its flags.
  auto cut = create_like_request(FUSE_CREATE, O_RDWR | __O_TMPFILE, "n");
  cut.resize(sizeof(fuse_in_header) + sizeof(std::uint32_t));
  EXPECT_FALSE(rewrite_tmpfile_as_create(cut.data(), cut.size()));
  std::uint32_t flags;
  std::memcpy(&flags, cut.data() + sizeof(fuse_in_header), sizeof flags);
  EXPECT_EQ(flags, static_cast<std::uint32_t>(O_RDWR));
}

TEST(TmpfileRequest, TruncatedOrOtherRequestsAreLeftAlone) {
  auto b = create_like_request(tmpfile_abi::kFuseTmpfile, O_RDWR, "/");
  // Cut before the name: libfuse answers it as it would (ENOSYS), nothing is read past the end.
  for (std::size_t cut : {std::size_t{0}, sizeof(fuse_in_header) - 1, sizeof(fuse_in_header),
                          sizeof(fuse_in_header) + sizeof(fuse_create_in)}) {
    auto t = b;
    t.resize(cut);
    auto copy = t;
    EXPECT_FALSE(rewrite_tmpfile_as_create(t.data(), t.size())) << cut;
    EXPECT_EQ(t, copy) << cut;
  }
  // A header whose len claims less than the two headers and a name.
  auto short_len = b;
  fuse_in_header in = header_of(short_len);
  in.len = sizeof(fuse_in_header) + 4;
  std::memcpy(short_len.data(), &in, sizeof in);
  const auto copy = short_len;
  EXPECT_FALSE(rewrite_tmpfile_as_create(short_len.data(), short_len.size()));
  EXPECT_EQ(short_len, copy);
  auto mknod = create_like_request(FUSE_MKNOD, O_RDWR | __O_TMPFILE, "n");
  const auto mknod_copy = mknod;
  EXPECT_FALSE(rewrite_tmpfile_as_create(mknod.data(), mknod.size()));
  EXPECT_EQ(mknod, mknod_copy);
  EXPECT_FALSE(rewrite_tmpfile_as_create(nullptr, 100));
}

}  // namespace
}  // namespace gcfs::mount
