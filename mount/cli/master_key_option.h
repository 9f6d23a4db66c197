// The master key as the last way back into a vault: `init` prints it once, for paper;
// `mount --masterkey` and `passwd --masterkey` take it back (from standard input, the terminal or
// --masterkey-file, never from the command line, where `ps` would show it) when the password is
// forgotten or the config is lost. Without a config the chunk size comes from the vault's files
// (fs/master_key_probe.h) or from --chunk-size, checked against them.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "crypto/secret.h"
#include "crypto/vault_config.h"
#include "mount/cli/config_option.h"

namespace gcfs::cli {

struct MasterKeyOptions {
  bool use = false;        // --masterkey
  std::string file;        // --masterkey-file
  std::string chunk_size;  // --chunk-size, for a vault without its config
  bool given() const { return use || !file.empty(); }
};

void add_master_key_options(boost::program_options::options_description& opts, MasterKeyOptions* o);

// init: the key in hex groups with the advice to keep it on paper.
void print_master_key(std::ostream& out, const SecretBytes& key);

// Reads and parses the key; CodedError(kExitBadMasterKey) when it is malformed.
SecretBytes read_master_key(const MasterKeyOptions& o);

// The config to use with the master key: the vault's own when it can be read (a forgotten
// password; its scrypt salt and wrap are then unused), else VaultConfig::defaults with the chunk
// size that --chunk-size gives or that the files show. Checks the key against the vault's files
// first: CodedError(kExitBadMasterKey) when nothing opens with it, or --chunk-size contradicts
// them. What the user should know (a lost config, a chunk size assumed) goes to *warnings.
VaultConfig config_for_master_key(const std::string& cipherdir, const ConfigPlace& place, const SecretBytes& key,
                                  const MasterKeyOptions& o, std::vector<std::string>* warnings, bool* config_found);

}  // namespace gcfs::cli
