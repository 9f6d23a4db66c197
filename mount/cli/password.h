// Where a password comes from: a file (--passfile), a program's output (--extpass), standard input
// when it is not a terminal (a pipe or a file, as in gocryptfs; "Reading password from stdin" goes
// to stderr), or else the terminal with echo off. A password never appears on a command line of ours, so it never shows in ps.
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "crypto/key_slot.h"
#include "crypto/secret.h"

namespace gcfs::cli {

struct PasswordSource {
  std::string passfile;  // first line of this file
  std::string extpass;   // run through /bin/sh; first line of its stdout
  std::string keyfile;   // a key file: its whole content is the secret, for key slots of that kind
  bool given() const { return !passfile.empty() || !extpass.empty() || !keyfile.empty(); }
};

// A password or a key file's content, and which of the two, for the slots of that kind.
struct UnlockSecret {
  SecretString text;
  KeySlotKind kind = KeySlotKind::Password;
};

// --keyfile F for a command's unlock options, and the check that at most one of --passfile,
// --extpass and --keyfile is given (a usage error otherwise).
void add_keyfile_option(boost::program_options::options_description& opts, std::string* keyfile);
void require_one_secret_source(const PasswordSource& src);
// The same for a new secret: --new-passfile F or --new-keyfile F (given as passfile and keyfile).
void require_new_secret_source(const PasswordSource& src);

// The key file's whole content, any bytes, 1 to kMaxKeyFileBytes (crypto/key_slot.h), read with
// read(2) into secret memory. what: "key file" or "new key file", for messages. Throws UserError
// for an unreadable file, CodedError(kExitEmptyPassword) for an empty one, UserError for a larger
// one; warns, as for a password file, when others can read it.
SecretString read_key_file(const std::string& path, const char* what = "key file");

// The key file when src names one, else read_password().
UnlockSecret read_unlock_secret(const PasswordSource& src, const std::string& prompt, bool confirm = false);

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
