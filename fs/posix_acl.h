// POSIX ACLs in the form the kernel passes them through system.posix_acl_access and
// system.posix_acl_default (a little-endian version word, 2, then 8-byte entries: tag, permission,
// id), and the kernel's rules for them that a FUSE daemon must apply itself: the mode an access
// ACL implies, an ACL that chmod rewrites, and what a new entry inherits from its directory's
// default ACL. libacl works on files by path and on its own formats, not on this one, so the
// few rules are written here after the kernel's (fs/posix_acl.c).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace gcfs {

struct AclEntry {
  std::uint16_t tag;
  std::uint16_t perm;
  std::uint32_t id;
};

class PosixAcl {
 public:
  static constexpr std::uint16_t kUserObj = 0x01, kUser = 0x02, kGroupObj = 0x04, kGroup = 0x08, kMask = 0x10,
                                 kOther = 0x20;

  // nullopt when the value is not a well-formed ACL (wrong version, a partial entry, an unknown
  // tag, a missing or repeated owner/group/other entry, named entries without a mask).
  static std::optional<PosixAcl> parse(std::span<const std::uint8_t> value);
  std::vector<std::uint8_t> serialize() const;

  // The permission bits (0777) the ACL gives the owner, the group class (the mask when there is
  // one) and others: what `ls -l` shows.
  mode_t permission_bits() const;
  // Whether the ACL says no more than those bits (only the three base entries): then no ACL is
  // stored, the mode alone says it (posix_acl_equiv_mode).
  bool equivalent_to_mode() const;
  // chmod: owner, group class and other entries take the new bits (posix_acl_chmod).
  void apply_chmod(mode_t mode);
  // A new entry's access ACL from its directory's default ACL, and the mode it is created with:
  // each class limited by the requested mode and the mode limited by the ACL
  // (posix_acl_create_masq). *mode keeps its type and setid bits.
  PosixAcl inherit_for_new_entry(mode_t* mode) const;

  const std::vector<AclEntry>& entries() const { return entries_; }

 private:
  AclEntry* find(std::uint16_t tag);
  std::vector<AclEntry> entries_;
};

}  // namespace gcfs
