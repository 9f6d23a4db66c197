#include "mount/cli_options.h"

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

}  // namespace gcfs::cli
