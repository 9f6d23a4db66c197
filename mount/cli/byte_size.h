// Byte sizes on the command line and in messages: 64M in, "64 MiB" out.
#pragma once

#include <cstdint>
#include <string>

namespace gcfs::cli {

// "4096", "512K", "64M", "10G", "1T" (also "64MiB", "64MB": binary multiples either way).
// Throws UserError naming the text it could not read.
std::uint64_t parse_byte_size(const std::string& text);
// 1073741824 -> "1 GiB"; sizes that are not a whole unit keep two decimals.
std::string format_byte_size(std::uint64_t bytes);

}  // namespace gcfs::cli
