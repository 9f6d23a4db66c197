// gpucryptfs: one binary, one subcommand per job (git-style).
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "mount/commands.h"
#include "mount/process_hardening.h"

namespace {

struct Entry {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Entry kCommands[] = {
    {"init", gcfs::cli::cmd_init, "create a new encrypted directory vault"},
    {"mount", gcfs::cli::cmd_mount, "mount a vault (plaintext view) on a directory"},
    {"passwd", gcfs::cli::cmd_passwd, "change a vault's password"},
    {"info", gcfs::cli::cmd_info, "show a vault's parameters and the GPUs this build sees"},
    {"fsck", gcfs::cli::cmd_fsck, "check every header, chunk and name of a vault"},
    {"volume", gcfs::cli::cmd_volume, "encrypted block volumes: create, mount, resize, info, passwd, fsck"},
    {"bench", gcfs::cli::cmd_bench, "measure engines, chunk sizes and request sizes"},
};

void usage(std::ostream& out) {
  out << "usage: gpucryptfs COMMAND [OPTIONS] ...\n\ncommands:\n";
  for (const auto& c : kCommands) out << "  " << c.name << std::string(10 - std::strlen(c.name), ' ') << c.summary << "\n";
  out << "\n'gpucryptfs COMMAND --help' describes each command's options.\n";
}

}  // namespace

int main(int argc, char** argv) {
  gcfs::cli::harden_process();  // before any password or key is in memory
  if (argc < 2) {
    usage(std::cerr);
    return gcfs::cli::kExitUsage;
  }
  const std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "-V" || cmd == "version") {
    std::cout << "gpucryptfs " << GPUCRYPTFS_VERSION << "\n";
    return 0;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(std::cout);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (cmd == c.name) {
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::cerr << "gpucryptfs " << cmd << ": " << e.what() << "\n";
        return gcfs::cli::kExitError;
      }
    }
  }
  // One line, as every other failure: the list of commands is one --help away.
  std::cerr << "gpucryptfs: unknown command '" << cmd << "' (see 'gpucryptfs --help' for the commands)\n";
  return gcfs::cli::kExitUsage;
}
