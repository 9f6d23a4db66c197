// Which transport carries a mount's FUSE requests, and whether this kernel offers io_uring.
//
//   classic: read() and writev() on /dev/fuse (mount/transport/request_loop.h);
//   uring:   the kernel's FUSE-over-io_uring queues (mount/transport/uring_transport.h), one per CPU;
//   auto:    uring where the kernel offers it, classic otherwise.
//
// Either way INIT, FORGET, INTERRUPT and notifications go through /dev/fuse: the ring does not
// carry them.
#pragma once

#include <cstddef>
#include <string>

namespace gcfs::mount {

enum class Transport { Auto, Uring, Classic };

inline constexpr const char* kTransportHelp =
    "how FUSE requests travel: auto (io_uring where the kernel offers it, else /dev/fuse), uring (io_uring or "
    "refuse to mount), classic (/dev/fuse)";

// "auto", "uring", "classic"; anything else throws boost::program_options::error (exit 2).
Transport parse_transport(const std::string& text);
const char* transport_name(Transport t);

// The kernel switch for FUSE over io_uring (Linux 6.14 and later).
inline constexpr const char* kEnableUringPath = "/sys/module/fuse/parameters/enable_uring";

// Empty when this kernel would hand requests to an io_uring ring; otherwise one line saying why
// not and, where it is a switch, how to turn it on. `switch_path` is for the tests.
std::string uring_unavailable_reason(const std::string& switch_path = kEnableUringPath);

// The largest READ or WRITE to ask the kernel for: 1 MiB, or up to 4 MiB where root raised
// /proc/sys/fs/fuse/max_pages_limit (the kernel's cap on a request's pages). Read once.
std::size_t max_request_bytes();
// The same from a given max_pages_limit value (0: the file was unreadable) and page size.
std::size_t max_request_bytes_for(unsigned long max_pages_limit, std::size_t page);

}  // namespace gcfs::mount
