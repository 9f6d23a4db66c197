// Commands whose implementation has not landed yet. Each helper that implements a command removes
// its line here and adds its cmd_*.cc to CMakeLists.txt.
#include <iostream>

#include "mount/commands.h"

namespace gcfs::cli {
namespace {
int pending(const char* name) {
  std::cerr << "gpucryptfs " << name << ": not implemented in this build\n";
  return kExitError;
}
}  // namespace


}  // namespace gcfs::cli
