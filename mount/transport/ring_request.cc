// A ring entry's request and reply in the shape of /dev/fuse's, and back (ring_request.h).
#include "mount/transport/ring_request.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace gcfs::mount {

using uring_abi::ReqHeader;

RingRequest assemble_ring_request(const ReqHeader& header, unsigned char* payload, std::size_t payload_capacity) {
  RingRequest r;
  fuse_in_header in;
  std::memcpy(&in, header.in_out, sizeof in);
  r.opcode = in.opcode;
  r.unique = in.unique;
  const std::uint64_t payload_bytes = header.ring_ent_in_out.payload_sz;
  const std::uint64_t len = in.len;
  if (len < sizeof in) {
    r.error = "length " + std::to_string(len) + " is shorter than the request header";
    return r;
  }
  if (payload_bytes > payload_capacity) {
    r.error = "payload of " + std::to_string(payload_bytes) + " bytes overruns the " +
              std::to_string(payload_capacity) + "-byte buffer";
    return r;
  }
  if (len < sizeof in + payload_bytes) {
    r.error = "length " + std::to_string(len) + " is shorter than header and payload (" +
              std::to_string(sizeof in + payload_bytes) + ")";
    return r;
  }
  const std::uint64_t op_bytes = len - sizeof in - payload_bytes;
  if (op_bytes > uring_abi::kOpInOutBytes) {
    r.error = "length " + std::to_string(len) + " leaves " + std::to_string(op_bytes) +
              " bytes of operation header, more than the ring's " + std::to_string(uring_abi::kOpInOutBytes);
    return r;
  }
  static_assert(kRingPrefixBytes >= sizeof(fuse_in_header) + uring_abi::kOpInOutBytes);
  r.start = payload - sizeof in - op_bytes;
  std::memcpy(r.start, header.in_out, sizeof in);
  std::memcpy(r.start + sizeof in, header.op_in, op_bytes);
  r.bytes = static_cast<std::size_t>(len);
  return r;
}

long store_ring_reply(const iovec* iov, int count, ReqHeader* header, unsigned char* payload,
                      std::size_t payload_capacity) {
  if (count < 1 || iov[0].iov_len < sizeof(fuse_out_header) || !iov[0].iov_base) return -1;
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof out);
  std::size_t body = 0;
  for (int i = 1; i < count; ++i) body += iov[i].iov_len;
  // What the kernel checks on commit: the unique of the request it handed out, and an error of 0
  // or a negative errno with no body.
  if (body > payload_capacity || out.error > 0 || out.error <= -4096) {
    out.error = -EIO;
    body = 0;
  }
  if (out.error != 0) body = 0;
  std::size_t at = 0;
  for (int i = 1; i < count && at < body; ++i) {
    const std::size_t n = std::min(iov[i].iov_len, body - at);
    if (iov[i].iov_base != payload + at) std::memmove(payload + at, iov[i].iov_base, n);
    at += n;
  }
  out.len = static_cast<std::uint32_t>(sizeof out + body);
  std::memcpy(header->in_out, &out, sizeof out);
  header->ring_ent_in_out.payload_sz = static_cast<std::uint32_t>(body);
  std::size_t counted = 0;
  for (int i = 0; i < count; ++i) counted += iov[i].iov_len;
  return static_cast<long>(counted);
}

void store_ring_error(ReqHeader* header, int error) {
  fuse_in_header in;
  std::memcpy(&in, header->in_out, sizeof in);
  fuse_out_header out{};
  out.len = sizeof out;
  out.error = -error;
  out.unique = in.unique;
  std::memcpy(header->in_out, &out, sizeof out);
  header->ring_ent_in_out.payload_sz = 0;
}

bool is_buffered_read_of(const ReqHeader& header, std::size_t min_bytes) {
  fuse_in_header in;
  std::memcpy(&in, header.in_out, sizeof in);
  if (in.opcode != FUSE_READ) return false;
  // The op header's size, as assemble_ring_request finds it: too short for fuse_read_in is
  // malformed, and left to that check.
  const std::uint64_t payload_bytes = header.ring_ent_in_out.payload_sz;
  if (in.len < sizeof in + payload_bytes || in.len - sizeof in - payload_bytes < sizeof(fuse_read_in)) return false;
  fuse_read_in read;
  std::memcpy(&read, header.op_in, sizeof read);
  return read.size >= min_bytes && !(read.flags & O_DIRECT);
}

bool init_offers_uring(const void* request, std::size_t bytes) {
  fuse_in_header in;
  fuse_init_in init;
  if (bytes < sizeof in + sizeof init) return false;  // a kernel older than 7.36 has no flags2
  std::memcpy(&in, request, sizeof in);
  std::memcpy(&init, static_cast<const unsigned char*>(request) + sizeof in, sizeof init);
  if (in.opcode != FUSE_INIT || init.major != 7 || init.minor < 36 || !(init.flags & uring_abi::kFuseInitExt))
    return false;
  return (init.flags2 & static_cast<std::uint32_t>(uring_abi::kFuseOverIoUring >> 32)) != 0;
}

bool init_offers_killpriv_v2(const void* request, std::size_t bytes) {
  fuse_in_header in;
  // flags is the first word after major and minor: present in every INIT since 7.6.
  constexpr std::size_t kFlagsEnd = offsetof(fuse_init_in, flags) + sizeof(std::uint32_t);
  if (bytes < sizeof in + kFlagsEnd) return false;
  std::memcpy(&in, request, sizeof in);
  fuse_init_in init{};
  std::memcpy(&init, static_cast<const unsigned char*>(request) + sizeof in, kFlagsEnd);
  return in.opcode == FUSE_INIT && init.major == 7 && init.minor >= 33 && (init.flags & FUSE_HANDLE_KILLPRIV_V2);
}

bool patch_init_reply(void* body, std::size_t bytes, bool uring, std::size_t max_request, bool killpriv_v2) {
  fuse_init_out out;
  if (bytes < offsetof(fuse_init_out, unused)) return false;
  std::memcpy(&out, body, offsetof(fuse_init_out, unused));
  if (killpriv_v2) out.flags |= FUSE_HANDLE_KILLPRIV_V2;
  if (uring) {
    out.flags |= uring_abi::kFuseInitExt;
    out.flags2 |= static_cast<std::uint32_t>(uring_abi::kFuseOverIoUring >> 32);
  }
  if (max_request > out.max_write && (out.flags & uring_abi::kFuseMaxPages)) {
    const long sys_page = ::sysconf(_SC_PAGESIZE);
    const std::size_t page = sys_page > 0 ? static_cast<std::size_t>(sys_page) : 4096;
    out.max_write = static_cast<std::uint32_t>(max_request);
    out.max_pages = static_cast<std::uint16_t>(std::min<std::size_t>((max_request + page - 1) / page, 0xffff));
    out.max_readahead = std::max<std::uint32_t>(out.max_readahead, static_cast<std::uint32_t>(max_request));
  }
  std::memcpy(body, &out, offsetof(fuse_init_out, unused));
  return true;
}

std::uint32_t write_flags_of(const void* request, std::size_t bytes) {
  fuse_in_header in;
  constexpr std::size_t kFlagsEnd = offsetof(fuse_write_in, write_flags) + sizeof(std::uint32_t);
  if (!request || bytes < sizeof in + kFlagsEnd) return 0;
  std::memcpy(&in, request, sizeof in);
  if (in.opcode != FUSE_WRITE || in.len < sizeof in + kFlagsEnd) return 0;
  std::uint32_t flags;
  std::memcpy(&flags, static_cast<const unsigned char*>(request) + sizeof in + offsetof(fuse_write_in, write_flags),
              sizeof flags);
  return flags;
}

}  // namespace gcfs::mount
