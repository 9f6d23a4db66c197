// Reading and writing CIPHERDIR/gpucryptfs.conf. crypto/vault_config.h parses and serialises the
// config; this is the file around it, reached the way every vault-owned file is (fs/safe_open.h):
// beneath a descriptor of CIPHERDIR, never through a symbolic link, never blocking on a FIFO or
// a device, and never reading more than a config can hold.
//
// CIPHERDIR itself is a path the user named, so it is followed as usual (a symlinked CIPHERDIR
// works); only what lies inside it is distrusted.
#pragma once

#include <cstddef>
#include <string>

#include "crypto/vault_config.h"

namespace gcfs {

// The largest gpucryptfs.conf read. A config is about 600 bytes (a volume's must fit a 4 KiB
// header slot); anything much larger is not one, and reading it whole would let a sparse file of
// gigabytes cost seconds and memory before the parser refused it.
constexpr std::size_t kMaxConfigFileBytes = 16 * 1024;

// Reads CIPHERDIR/gpucryptfs.conf. Throws NotAVault (fs/vault_errors.h) when CIPHERDIR or the config is
// missing or CIPHERDIR is not a directory; CorruptData when the config is a symbolic link, a
// FIFO, socket, device or directory, larger than kMaxConfigFileBytes, or does not parse;
// UserError when it cannot be read (permissions, I/O) or is of a newer format. Every message
// names the path.
// file_name: another name in CIPHERDIR (reverse mode keeps its config in PLAINDIR as
// .gpucryptfs.reverse.conf).
VaultConfig read_config_file(const std::string& cipherdir, const std::string& file_name = kConfigFileName);

// Replaces CIPHERDIR/gpucryptfs.conf atomically, mode 0400: writes gpucryptfs.conf.tmp beneath
// CIPHERDIR's descriptor (created anew with O_EXCL, so no link or planted file is written
// through), fsyncs it, renames it over the config on the same descriptor and fsyncs CIPHERDIR.
// Throws UserError naming the problem; leaves no temporary behind.
void write_config_file(const std::string& cipherdir, const VaultConfig& config);
// The same beneath an open descriptor of CIPHERDIR (not O_PATH: it is fsynced).
void write_config_file_at(int cipherdir_fd, const std::string& cipherdir, const VaultConfig& config,
                          const std::string& file_name = kConfigFileName);

}  // namespace gcfs
