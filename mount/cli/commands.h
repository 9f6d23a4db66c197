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
int cmd_keyslot(int argc, char** argv);
int cmd_rekey(int argc, char** argv);

// Exit codes, documented in the README: scripts can tell a wrong password from a missing vault.
// 6, 10, 12, 22, 23 and 26 mean what they mean in gocryptfs; 1 and 2 follow the Unix habit
// (gocryptfs uses 1 for usage errors and 11 for others: README, "Errors and exit codes").
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,          // any other failure; the message says what
  kExitUsage = 2,          // bad command line, an invalid option value
  kExitBadCipherDir = 6,   // CIPHERDIR/CONTAINER missing or of the wrong type; init: not empty
  kExitBadMountpoint = 10, // missing or not empty
  kExitWrongPassword = 12,
  kExitBadMasterKey = 14,  // a master key that is malformed or does not open the vault (as gocryptfs)
  kExitEmptyPassword = 22, // an empty password file, answer or program output
  kExitBadConfig = 23,     // missing or corrupt config, not a vault, or a vault of the other kind
  kExitFsckProblems = 26,  // fsck found damage
  kExitVaultInUse = 31,    // a live read-write mount holds the vault (not a gocryptfs code: it allows two)
};

}  // namespace gcfs::cli
