// The kernel's FUSE-over-io_uring ABI, declared here because Debian 12's kernel headers
// (linux/fuse.h of 6.1) predate it. Every definition below is copied in meaning from the uapi
// header linux/fuse.h of Linux 6.14 and later (FUSE protocol 7.42: FUSE_OVER_IO_URING,
// FUSE_URING_IN_OUT_HEADER_SZ, struct fuse_uring_ent_in_out, struct fuse_uring_req_header,
// enum fuse_uring_cmd, struct fuse_uring_cmd_req) and from the kernel's
// Documentation/filesystems/fuse-io-uring.rst. The static_asserts pin the layout the kernel reads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gcfs::mount::uring_abi {

// FUSE_INIT flag (64-bit flags: bit 41, i.e. bit 9 of fuse_init_in/out.flags2): in the kernel's
// INIT request, "io_uring is enabled here"; in the reply, "this daemon will register a ring".
inline constexpr std::uint64_t kFuseOverIoUring = 1ull << 41;
// FUSE_INIT_EXT: flags2 is valid (both directions).
inline constexpr std::uint32_t kFuseInitExt = 1u << 30;
// FUSE_MAX_PAGES: the reply's max_pages is valid.
inline constexpr std::uint32_t kFuseMaxPages = 1u << 22;

inline constexpr std::size_t kInOutHeaderBytes = 128;  // FUSE_URING_IN_OUT_HEADER_SZ
inline constexpr std::size_t kOpInOutBytes = 128;      // FUSE_URING_OP_IN_OUT_SZ

// struct fuse_uring_ent_in_out.
struct EntInOut {
  std::uint64_t flags;
  // The id a COMMIT_AND_FETCH must carry for this request (the kernel sets the request's unique).
  std::uint64_t commit_id;
  // Bytes valid in the payload buffer: written by the kernel on fetch, by us on commit.
  std::uint32_t payload_sz;
  std::uint32_t padding;
  std::uint64_t reserved;
};

// struct fuse_uring_req_header: iov[0] of a REGISTER, one per ring entry.
struct ReqHeader {
  // fuse_in_header on fetch, fuse_out_header on commit.
  unsigned char in_out[kInOutHeaderBytes];
  // The request's first argument, its per-opcode header (fuse_write_in, ...); may be empty.
  unsigned char op_in[kOpInOutBytes];
  EntInOut ring_ent_in_out;
};

// enum fuse_uring_cmd: the io_uring_sqe's cmd_op of an IORING_OP_URING_CMD on /dev/fuse.
inline constexpr std::uint32_t kCmdRegister = 1;        // FUSE_IO_URING_CMD_REGISTER
inline constexpr std::uint32_t kCmdCommitAndFetch = 2;  // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

// struct fuse_uring_cmd_req: the command area of a 128-byte SQE (IORING_SETUP_SQE128).
struct CmdReq {
  std::uint64_t flags;
  std::uint64_t commit_id;  // 0 for REGISTER
  std::uint16_t qid;        // the queue (CPU number) the entry belongs to
  std::uint8_t padding[6];
};

static_assert(sizeof(EntInOut) == 32);
static_assert(sizeof(ReqHeader) == 288);
static_assert(offsetof(ReqHeader, ring_ent_in_out) == 256);
static_assert(sizeof(CmdReq) == 24);

}  // namespace gcfs::mount::uring_abi
