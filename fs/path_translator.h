// Whole paths mapped between a mount's plaintext and its ciphertext, for the control socket
// (mount --ctlsock): backup and sync tools that see one side ask for the other. Implemented for a
// directory vault (fs/forward_paths.h) and for reverse mode's view (fs/reverse_view.h).
#pragma once

#include <string>
#include <string_view>

namespace gcfs {

class PathTranslator {
 public:
  virtual ~PathTranslator() = default;
  // plain and cipher are relative to the mount's root, in canonical form (canonical_path), ""
  // for the root itself. 0 with *out set, or -errno (-ENOENT when a directory on the way is not
  // there: its IV cannot be read; -EBADMSG for a ciphertext name that does not decrypt).
  virtual int encrypt_path(const std::string& plain, std::string* out) = 0;
  virtual int decrypt_path(const std::string& cipher, std::string* out) = 0;
};

// A path as gocryptfs's control socket reads it: repeated and trailing slashes dropped, "." and
// ".." resolved (never above the root), the leading slash gone. "/d//a/../b/" is "d/b".
std::string canonical_path(std::string_view path);

}  // namespace gcfs
