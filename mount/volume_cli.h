// Pieces the volume subcommands share: byte sizes with suffixes on the command line, and the
// mapping from our exceptions to the documented exit codes (mount/commands.h).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string>

namespace gcfs::cli {

// "4096", "512K", "64M", "10G", "1T" (also "64MiB", "64MB": binary multiples either way).
// Throws UserError naming the text it could not read.
std::uint64_t parse_byte_size(const std::string& text);
// 1073741824 -> "1 GiB"; sizes that are not a whole unit keep two decimals.
std::string format_byte_size(std::uint64_t bytes);

// WrongPassword -> kExitWrongPassword, CorruptData -> kExitBadConfig, anything else -> kExitError.
int exit_code_of(const std::exception& e);

// Runs body; prints "gpucryptfs volume <sub>: <message>" for an exception and returns its exit
// code, so every failure is one line a user can act on.
int run_reporting(const std::string& what, const std::function<int()>& body);

}  // namespace gcfs::cli
