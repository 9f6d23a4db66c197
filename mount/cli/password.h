// Where a password comes from: a file (--passfile), a program's output (--extpass), standard input
// when it is not a terminal (a pipe or a file, as in gocryptfs; "Reading password from stdin" goes
// to stderr), or else the terminal with echo off. A password never appears on a command line of ours, so it never shows in ps.
#pragma once

#include <string>

#include "crypto/secret.h"

namespace gcfs::cli {

struct PasswordSource {
  std::string passfile;  // first line of this file
  std::string extpass;   // run through /bin/sh; first line of its stdout
};

// Throws UserError for an unreadable file, a failing program, or no terminal to ask on, and
// CodedError(kExitEmptyPassword) for an empty password. With confirm, asks twice on the terminal
// and insists the two match (standard input is read once). The password
// and every buffer it passed through are wiped when they are dropped, on the error paths too;
// nothing holds it in a std::string.
SecretString read_password(const PasswordSource& src, const std::string& prompt, bool confirm = false);

// The text of a master key (mount and passwd --masterkey): the first line of file when given,
// else standard input when it is not a terminal, else the terminal with echo off. Never a
// command-line argument. Empty: CodedError(kExitBadMasterKey).
SecretString read_master_key_text(const std::string& file);

}  // namespace gcfs::cli
