// --transport, and whether this kernel offers FUSE over io_uring (transport.h).
#include "mount/transport/transport.h"

#include <unistd.h>

#include <algorithm>
#include <boost/program_options/errors.hpp>
#include <fstream>

namespace gcfs::mount {

Transport parse_transport(const std::string& text) {
  if (text == "auto") return Transport::Auto;
  if (text == "uring") return Transport::Uring;
  if (text == "classic") return Transport::Classic;
  throw boost::program_options::error("--transport " + text + ": choose auto, uring or classic");
}

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::Auto: return "auto";
    case Transport::Uring: return "uring";
    case Transport::Classic: return "classic";
  }
  return "?";
}

std::string uring_unavailable_reason(const std::string& switch_path) {
  std::ifstream in(switch_path);
  if (!in)
    return "this kernel has no FUSE over io_uring (it needs Linux 6.14 or later built with "
           "CONFIG_FUSE_IO_URING; " + switch_path + " is missing)";
  std::string value;
  in >> value;
  if (value == "Y" || value == "y" || value == "1") return "";
  return "io_uring is off in this kernel: echo 1 > " + switch_path + " (as root; see docs/USAGE.md to keep it on)";
}

std::size_t max_request_bytes_for(unsigned long max_pages_limit, std::size_t page) {
  constexpr std::size_t kFloor = 1u << 20, kCeiling = 4u << 20;
  if (max_pages_limit == 0 || page == 0) return kFloor;
  const std::size_t allowed = static_cast<std::size_t>(std::min<unsigned long>(max_pages_limit, kCeiling / page)) * page;
  return std::clamp(allowed, kFloor, kCeiling);
}

std::size_t max_request_bytes() {
  static const std::size_t bytes = [] {
    unsigned long limit = 0;
    std::ifstream in("/proc/sys/fs/fuse/max_pages_limit");
    if (!(in >> limit)) limit = 0;
    const long page = ::sysconf(_SC_PAGESIZE);
    return max_request_bytes_for(limit, page > 0 ? static_cast<std::size_t>(page) : 4096);
  }();
  return bytes;
}

}  // namespace gcfs::mount
