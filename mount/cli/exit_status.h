// Turning a command's failure into its one-line message and documented exit code (see
// mount/cli/commands.h and docs/USAGE.md), so scripts can tell a wrong password from a missing vault.
#pragma once

#include <exception>
#include <functional>

#include <string>

#include "crypto/errors.h"

namespace gcfs::cli {

// A failure that carries its own documented exit code (a bad CIPHERDIR, an empty password).
struct CodedError : UserError {
  CodedError(int code, const std::string& message) : UserError(message), exit_code(code) {}
  int exit_code;
};

// The exit code for an exception a command let escape.
int exit_code_for(const std::exception& e);

// Runs body; on an exception prints "gpucryptfs <command>: <message>" to stderr and returns the
// matching exit code (kExitUsage for command-line mistakes).
int run_command(const char* command, const std::function<int()>& body);

}  // namespace gcfs::cli
