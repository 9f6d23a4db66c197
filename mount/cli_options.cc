#include "mount/cli_options.h"

#include <algorithm>
#include <cctype>
#include <iostream>

namespace po = boost::program_options;

namespace gcfs::cli {

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
    std::cout << visible << "\n";
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

void add_allow_expensive_kdf_option(po::options_description& opts, bool* allow) {
  opts.add_options()("allow-expensive-kdf", po::bool_switch(allow),
                     "unlock even when the config asks for a scrypt cost above what 'init' creates (r above 8, "
                     "p above 1, or more than half of this machine's memory); without it such a config is refused "
                     "before scrypt runs, since anyone who can write the config can set its cost");
}

}  // namespace gcfs::cli
