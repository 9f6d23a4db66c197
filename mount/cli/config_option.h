// --config FILE: a vault's config kept outside CIPHERDIR (so that a sync service or a backup of
// CIPHERDIR never holds it), for init, mount, passwd, info and fsck. Without it the config is
// CIPHERDIR/gpucryptfs.conf, as always.
//
// FILE is a path the user named, so it is followed as any path is (a link to it works); it is then
// read and replaced as the config in CIPHERDIR is (fs/config_file.h): a regular file of at most
// 16 KiB, written as a new file beside it and renamed over it.
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "crypto/vault_config.h"

namespace gcfs::cli {

struct ConfigPlace {
  std::string dir;   // the directory the config lives in
  std::string name;  // its name there
  bool outside = false;  // given with --config
  std::string path() const { return dir + "/" + name; }
};

void add_config_option(boost::program_options::options_description& opts, std::string* value);

// Where the config of cipherdir is: --config's FILE (resolved to an absolute path whose directory
// exists; a usage error otherwise), or CIPHERDIR/gpucryptfs.conf.
ConfigPlace config_place(const std::string& cipherdir, const std::string& config_option);

// Vault::load_config at the place; a missing --config FILE is NotAVault naming it.
VaultConfig load_vault_config(const ConfigPlace& place);

// Writes config to the place atomically (passwd, init --config).
void save_vault_config(const ConfigPlace& place, const VaultConfig& config);

}  // namespace gcfs::cli
