// Command-line parsing shared by every subcommand: named options, positional arguments, --help.
#pragma once

#include <boost/program_options.hpp>
#include <initializer_list>
#include <string>
#include <vector>

#include "crypto/vault_config.h"

namespace gcfs::cli {

struct Positional {
  const char* name;    // as the usage line spells it: CIPHERDIR, MOUNTPOINT, CONTAINER
  std::string* value;
  bool required = true;
};

// Parses argv[1..] against `visible` (what --help prints: its caption carries the usage line) and the positional
// arguments in order. Returns false after printing the help when --help was given. A missing
// positional argument, an extra one or a bad option throws boost::program_options::error, which
// run_command reports as a usage error.
bool parse_command_line(int argc, char** argv, const boost::program_options::options_description& visible,
                        std::initializer_list<Positional> positional);

// --help: the caption, then each option with its description wrapped to width columns, broken
// only between words (continuation lines indented by the description column).
void print_help(std::ostream& out, const boost::program_options::options_description& desc, std::size_t width);
// text's words, broken into lines of at most width columns (counting an indent of `indent`
// before each line but the first, which it also starts every new line with); never inside a word.
std::string wrap_words(const std::string& text, std::size_t width, std::size_t indent);

// The value of --gpus: GPU numbers as `gpucryptfs info` lists them, separated by commas ("0,2"),
// or "all" (every visible GPU, also what an empty list means). Throws
// boost::program_options::error (a usage error) for anything else or a number given twice.
std::vector<int> parse_gpu_list(const std::string& text);

// A size option's value in bytes (parse_byte_size: 4096, 64K, 1M, 10G); a value that is no size
// is a usage error naming the option (boost::program_options::error, exit 2).
std::uint64_t parse_size_option(const char* option, const std::string& text);
// --allow-expensive-kdf, for every command that unlocks a vault or volume: the scrypt cost in a
// config is read before anything in it is authenticated, so a cost above what init creates is
// refused unless the user says they chose it (crypto/vault_config.h, KdfPolicy).
void add_allow_expensive_kdf_option(boost::program_options::options_description& opts, bool* allow);
inline KdfPolicy kdf_policy(bool allow_expensive) {
  return allow_expensive ? KdfPolicy::AllowExpensive : KdfPolicy::RefuseAboveInit;
}

}  // namespace gcfs::cli
