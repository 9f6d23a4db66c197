// Names that sync clients and file shares make out of ours (mount --badname GLOB). A client that
// finds two versions of a file keeps both by renaming one, appending to our encrypted name:
//   <encrypted> (conflicted copy 2026-12-01)              Dropbox, Nextcloud, ownCloud, Seafile
//   <encrypted>.sync-conflict-20261201-123456-ABCDEFG     Syncthing
//   gcfs.longname.sync-conflict-...-ABCDEFG.<hash>        Syncthing and Dropbox on a long name (they
//   gcfs.longname (conflicted copy 2026-12-01).<hash>     keep the part after the last dot as an
//                                                         extension and insert before it)
// Such an entry no longer decrypts. When it matches one of the user's patterns it is shown as the
// plaintext of its longest decryptable prefix followed by the appended text, as it is on disk
// ("report.txt (conflicted copy 2026-12-01)"), and the shown name maps back to that entry, so it
// reads, renames and unlinks like any file. A matching entry with no decryptable prefix, or whose
// shown name would be a real entry's name or too long, is shown raw with kBadNameMarker appended.
// No FUSE here: the daemon and the control socket's path mapping both use it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/name_mapping.h"

namespace gcfs {

// Appended to an entry shown raw (gocryptfs appends " GOCRYPTFS_BAD_NAME" in the same place).
constexpr std::string_view kBadNameMarker = " GPUCRYPTFS_BAD_NAME";

class BadNamePatterns {
 public:
  BadNamePatterns() = default;
  // fnmatch(3) patterns matched against the whole backing entry ('*' matches anything).
  explicit BadNamePatterns(std::vector<std::string> globs) : globs_(std::move(globs)) {}
  bool empty() const { return globs_.empty(); }
  // Whether entry may be shown as a bad name: it matches a pattern and is none of the vault's
  // own files (config, dir IV, journal, .name and long-target files, and their copies).
  bool covers(std::string_view entry) const;

 private:
  std::vector<std::string> globs_;
};

// The name the entry of dirfd (IV iv) that does not decrypt is shown under, when patterns cover
// it; nullopt when it is to stay hidden (not covered, or its raw form would pass NAME_MAX).
std::optional<std::string> shown_bad_name(const NameMapping& names, int dirfd, std::string_view entry, const DirIv& iv,
                                          const BadNamePatterns& patterns);

// Whether an entry that does not decrypt is a conflict copy: a decryptable name with text added
// in one of the shapes above (fsck says so, whatever --badname a mount is given).
bool is_conflict_copy(const NameMapping& names, int dirfd, std::string_view entry, const DirIv& iv);

// The entry of dirfd that shown_bad_name shows as `shown`, or nullopt. Tried only for a name that
// has no entry of its own: it encrypts each prefix of `shown` once (up to 254 AES-SIV runs and
// as many fstatat calls), the cost of a lookup that finds nothing while --badname is on.
std::optional<std::string> find_bad_name_entry(const NameMapping& names, int dirfd, std::string_view shown,
                                               const DirIv& iv, const BadNamePatterns& patterns);

}  // namespace gcfs
