// PathTranslator for a directory vault (fs/path_translator.h): each directory on the way is
// opened beneath CIPHERDIR (fs/safe_open.h, never a link followed) for its IV, and each name is
// mapped as the daemon maps it, --badname's conflict copies included.
#pragma once

#include <string>

#include "fs/conflict_names.h"
#include "fs/dir_iv_source.h"
#include "fs/name_mapping.h"
#include "fs/path_translator.h"
#include "fs/unique_fd.h"

namespace gcfs {

class ForwardPaths : public PathTranslator {
 public:
  // root_fd: CIPHERDIR (a descriptor of its own, O_PATH is enough); taken over.
  // ivs: the vault's (Vault::dir_ivs()).
  ForwardPaths(UniqueFd root_fd, const NameMapping& names, const DirIvSource& ivs, BadNamePatterns bad_names)
      : root_(std::move(root_fd)), names_(names), ivs_(ivs), bad_names_(std::move(bad_names)) {}
  // The last name need not exist (as gocryptfs: the name a file would have); the directories
  // above it must.
  int encrypt_path(const std::string& plain, std::string* out) override;
  // Every ciphertext name must decrypt (or, with --badname, be shown as a bad name).
  int decrypt_path(const std::string& cipher, std::string* out) override;

 private:
  UniqueFd root_;
  const NameMapping& names_;
  DirIvSource ivs_;
  BadNamePatterns bad_names_;
};

}  // namespace gcfs
