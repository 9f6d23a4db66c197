// Command-line parsing shared by every verb (cli_options.h).
#include "mount/cli/cli_options.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "crypto/errors.h"
#include "mount/cli/byte_size.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

// The width --help wraps to: $COLUMNS, else the terminal's, else 100.
std::size_t help_width() {
  if (const char* c = std::getenv("COLUMNS")) {
    const long n = std::strtol(c, nullptr, 10);
    if (n >= 40) return static_cast<std::size_t>(n);
  }
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) return ws.ws_col;
  return 100;
}

}  // namespace

std::string wrap_words(const std::string& text, std::size_t width, std::size_t indent) {
  std::istringstream words(text);
  std::string word, out, line;
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

void print_help(std::ostream& out, const po::options_description& desc, std::size_t width) {
  // Boost's own printer cuts words that do not fit ("lost+fo / und"); this one breaks only
  // between words and leaves a word longer than the line whole.
  // This Boost has no caption() accessor: the caption is what its own printer puts before the
  // first option line.
  std::ostringstream boost_text;
  boost_text << desc;
  const std::string text = boost_text.str();
  const auto first_option = text.find("\n  -");
  out << text.substr(0, first_option == std::string::npos ? text.size() : first_option + 1);
  std::vector<std::pair<std::string, std::string>> rows;
  std::size_t name_width = 0;
  for (const auto& o : desc.options()) {
    std::string name = o->format_name();
    const std::string param = o->format_parameter();
    if (!param.empty()) name += " " + param;
    name_width = std::max(name_width, name.size());
    rows.emplace_back(name, o->description());
  }
  const std::size_t column = std::min<std::size_t>(name_width + 4, 34);  // where descriptions start
  for (const auto& [name, description] : rows) {
    std::string line = "  " + name;
    if (line.size() + 2 > column) line += "\n" + std::string(column, ' ');
    else line += std::string(column - line.size(), ' ');
    out << line << wrap_words(description, width, column) << "\n";
  }
}

bool parse_command_line(int argc, char** argv, const po::options_description& visible,
                        std::initializer_list<Positional> positional) {
  po::options_description hidden;
  po::positional_options_description order;
  for (const auto& p : positional) {
    hidden.add_options()(p.name, po::value(p.value));
    order.add(p.name, 1);
  }
  po::options_description all;
  all.add(visible).add(hidden);
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(all).positional(order).run(), vm);
  if (vm.count("help")) {
    print_help(std::cout, visible, help_width());
    return false;
  }
  for (const auto& p : positional)
    if (p.required && !vm.count(p.name)) throw po::error(std::string(p.name) + " is missing");
  po::notify(vm);
  return true;
}

std::vector<int> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  if (text.empty() || text == "all") return out;
  const auto bad = [&](const std::string& why) {
    return po::error("--gpus " + text + ": " + why + " (give GPU numbers as 'gpucryptfs info' lists them, e.g. --gpus 0,1)");
  };
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty() || item.size() > 4 ||
        !std::all_of(item.begin(), item.end(), [](unsigned char c) { return std::isdigit(c); }))
      throw bad("'" + item + "' is not a GPU number");
    const int n = std::stoi(item);
    if (std::find(out.begin(), out.end(), n) != out.end()) throw bad("GPU " + item + " is named twice");
    out.push_back(n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::uint64_t parse_size_option(const char* option, const std::string& text) {
  try {
    return parse_byte_size(text);
  } catch (const UserError& e) {
    throw po::error(std::string(option) + ": " + e.what());
  }
}

void add_allow_expensive_kdf_option(po::options_description& opts, bool* allow) {
  opts.add_options()("allow-expensive-kdf", po::bool_switch(allow),
                     "unlock even when the config asks for a scrypt cost above what 'init' creates (r above 8, "
                     "p above 1, or more than half of this machine's memory); without it such a config is refused "
                     "before scrypt runs, since anyone who can write the config can set its cost");
}

}  // namespace gcfs::cli
