// The subcommands of the gpucryptfs binary. Each lives in its own cmd_*.cc file, parses its own
// options with Boost.Program_options, and returns the process exit code.
#pragma once

namespace gcfs::cli {

int cmd_init(int argc, char** argv);
int cmd_mount(int argc, char** argv);
int cmd_passwd(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_volume(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_fsck(int argc, char** argv);

// Exit codes, documented in the README: scripts can tell a wrong password from a missing vault.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,          // any other failure; the message says what
  kExitUsage = 2,          // bad command line
  kExitWrongPassword = 12,
  kExitBadConfig = 23,     // missing or corrupt config, or not a vault
  kExitBadMountpoint = 10, // missing or not empty
  kExitFsckProblems = 26,  // fsck found damage
};

}  // namespace gcfs::cli
