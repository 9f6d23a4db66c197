// gpucryptfs: one binary, one subcommand per job (git-style).
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/fstab_args.h"
#include "mount/cli/malloc_arenas.h"
#include "mount/cli/process_hardening.h"

namespace {

struct Entry {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Entry kCommands[] = {
    {"init", gcfs::cli::cmd_init, "create a new encrypted directory vault"},
    {"mount", gcfs::cli::cmd_mount, "mount a vault (plaintext view) on a directory"},
    {"passwd", gcfs::cli::cmd_passwd, "change a vault's password (the key slot that opened it)"},
    {"keyslot", gcfs::cli::cmd_keyslot, "list, add or remove a vault's key slots (passwords, key files)"},
    {"rekey", gcfs::cli::cmd_rekey, "re-encrypt a vault under a new master key (offline, resumable)"},
    {"info", gcfs::cli::cmd_info, "show a vault's parameters and the GPUs this build sees"},
    {"fsck", gcfs::cli::cmd_fsck, "check every header, chunk and name of a vault"},
    {"volume", gcfs::cli::cmd_volume, "encrypted block volumes: create, mount, resize, info, passwd, fsck, keyslot"},
    {"bench", gcfs::cli::cmd_bench, "measure engines, chunk sizes and request sizes"},
};

void usage(std::ostream& out) {
  out << "usage: gpucryptfs COMMAND [OPTIONS] ...\n\ncommands:\n";
  for (const auto& c : kCommands) out << "  " << c.name << std::string(10 - std::strlen(c.name), ' ') << c.summary << "\n";
  out << "\nAs a mount helper (mount.fuse3, /etc/fstab type fuse.gpucryptfs, systemd mount units):\n"
         "  gpucryptfs CIPHERDIR MOUNTPOINT -o passfile=FILE[,OPTIONS]   (see 'man gpucryptfs')\n";
  out << "\n'gpucryptfs COMMAND --help' describes each command's options.\n";
}

}  // namespace

int main(int argc, char** argv) {
  gcfs::cli::harden_process();  // before any password or key is in memory
  gcfs::cli::limit_malloc_arenas();  // before any thread starts
  // mount.fuse3 runs `gpucryptfs SOURCE MOUNTPOINT -o OPTIONS`; mount(8) runs a mount.* link to us.
  if (gcfs::cli::is_mount_helper_call(argc, argv)) {
    gcfs::cli::HelperCommand helper;
    const int rc = gcfs::cli::run_command("mount", [&] {
      helper = gcfs::cli::translate_mount_helper_args(std::vector<std::string>(argv + 1, argv + argc));
      return 0;
    });
    if (rc != 0 || helper.fake) return rc;
    std::vector<char*> args;
    for (auto& a : helper.mount) args.push_back(a.data());
    args.push_back(nullptr);
    return gcfs::cli::cmd_mount(static_cast<int>(args.size() - 1), args.data());
  }
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
