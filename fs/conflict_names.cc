// Sync clients' conflict copies of our entries (conflict_names.h).
#include "fs/conflict_names.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>

namespace gcfs {
namespace {

// base64url of a SHA-256 without padding: the hash part of a long-name entry.
constexpr std::size_t kLongHashChars = 43;
// The shortest encoded name: the 16-byte SIV tag alone, 22 base64url characters.
constexpr std::size_t kMinEncodedChars = 22;
// "gcfs.longname" without its dot: Syncthing inserts its text before the last dot of an entry.
constexpr std::string_view kLongNameStem = kLongNamePrefix.substr(0, kLongNamePrefix.size() - 1);

bool exists(int dirfd, const std::string& entry) {
  struct stat st {};
  return ::fstatat(dirfd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// The plaintext of a long-name entry whose .name file is in dirfd.
std::optional<std::string> long_plain(const NameMapping& names, int dirfd, std::string_view entry, const DirIv& iv) {
  if (entry.size() != kLongNamePrefix.size() + kLongHashChars) return std::nullopt;
  return names.to_plain(dirfd, entry, iv);
}

// The shown name of a covered entry that has a decryptable part, before the collision checks.
std::optional<std::string> decrypted_form(const NameMapping& names, int dirfd, std::string_view entry, const DirIv& iv) {
  if (entry.starts_with(kLongNameStem)) {
    const std::size_t base = kLongNamePrefix.size() + kLongHashChars;
    // Appended: gcfs.longname.<hash><text>.
    if (entry.size() > base && entry.starts_with(kLongNamePrefix))
      if (auto p = long_plain(names, dirfd, entry.substr(0, base), iv)) return *p + std::string(entry.substr(base));
    // Inserted before the last dot, which clients take for an extension's: gcfs.longname<text>.<hash>
    // (Syncthing's text is ".sync-conflict-...", Dropbox's " (conflicted copy ...)").
    if (entry.size() > kLongNameStem.size() + 1 + kLongHashChars && entry[entry.size() - kLongHashChars - 1] == '.') {
      const std::string_view hash = entry.substr(entry.size() - kLongHashChars);
      const std::string_view text = entry.substr(kLongNameStem.size(), entry.size() - kLongHashChars - 1 - kLongNameStem.size());
      if (auto p = long_plain(names, dirfd, std::string(kLongNamePrefix) + std::string(hash), iv))
        return *p + std::string(text);
    }
    return std::nullopt;
  }
  // The longest prefix that decrypts: SIV authenticates, so a shorter or longer cut of a real
  // name never decrypts by chance.
  if (entry.size() <= kMinEncodedChars) return std::nullopt;
  for (std::size_t cut = entry.size() - 1; cut >= kMinEncodedChars; --cut)
    if (auto p = names.decrypt_short(entry.substr(0, cut), iv)) return *p + std::string(entry.substr(cut));
  return std::nullopt;
}

std::optional<std::string> raw_form(std::string_view entry) {
  if (entry.size() + kBadNameMarker.size() > kMaxNameBytes) return std::nullopt;
  return std::string(entry) + std::string(kBadNameMarker);
}

}  // namespace

bool BadNamePatterns::covers(std::string_view entry) const {
  if (entry.starts_with("gpucryptfs.")) return false;
  if (entry.starts_with("gcfs.") && (!entry.starts_with(kLongNameStem) || entry.ends_with(kLongNameSuffix)))
    return false;
  const std::string e(entry);
  for (const auto& g : globs_)
    if (::fnmatch(g.c_str(), e.c_str(), 0) == 0) return true;
  return false;
}

std::optional<std::string> shown_bad_name(const NameMapping& names, int dirfd, std::string_view entry, const DirIv& iv,
                                          const BadNamePatterns& patterns) {
  if (!patterns.covers(entry)) return std::nullopt;
  auto shown = decrypted_form(names, dirfd, entry, iv);
  // The readable form only where it names nothing else: never longer than a name may be, never
  // a name that is a real entry's (both stay reachable, the copy under its raw form), never one
  // that ends in the marker (which would read as another entry's raw form).
  if (shown && shown->size() <= kMaxNameBytes && !shown->ends_with(kBadNameMarker) && shown->find('/') == std::string::npos &&
      !exists(dirfd, names.to_disk(*shown, iv, false).entry))
    return shown;
  return raw_form(entry);
}

bool is_conflict_copy(const NameMapping& names, int dirfd, std::string_view entry, const DirIv& iv) {
  return BadNamePatterns({"*"}).covers(entry) && decrypted_form(names, dirfd, entry, iv).has_value();
}

std::optional<std::string> find_bad_name_entry(const NameMapping& names, int dirfd, std::string_view shown,
                                               const DirIv& iv, const BadNamePatterns& patterns) {
  if (patterns.empty() || shown.empty()) return std::nullopt;
  // Each candidate is accepted only when it is shown under exactly this name.
  const auto accept = [&](const std::string& entry) -> std::optional<std::string> {
    if (entry.size() > kMaxNameBytes || !patterns.covers(entry) || !exists(dirfd, entry)) return std::nullopt;
    // A name that decrypts as it is is no bad name (it has a listing of its own).
    if (names.to_plain(dirfd, entry, iv)) return std::nullopt;
    auto s = shown_bad_name(names, dirfd, entry, iv, patterns);
    if (s && *s == shown) return entry;
    return std::nullopt;
  };
  if (shown.ends_with(kBadNameMarker))
    return accept(std::string(shown.substr(0, shown.size() - kBadNameMarker.size())));
  // The longest plaintext prefix first, as the listing cuts the longest encrypted prefix.
  for (std::size_t cut = shown.size() - 1; cut >= 1; --cut) {
    const std::string_view text = shown.substr(cut);
    const DiskName dn = names.to_disk(shown.substr(0, cut), iv, false);
    if (auto e = accept(dn.entry + std::string(text))) return e;
    if (dn.is_long)
      if (auto e = accept(std::string(kLongNameStem) + std::string(text) + "." + dn.entry.substr(kLongNamePrefix.size())))
        return e;
  }
  return std::nullopt;
}

}  // namespace gcfs
