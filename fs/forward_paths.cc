// Whole paths of a directory vault, both ways (forward_paths.h), and canonical_path.
#include "fs/forward_paths.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <vector>

#include "fs/safe_open.h"

namespace gcfs {
namespace {

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= path.size() && !path.empty()) {
    const std::size_t slash = path.find('/', start);
    out.push_back(path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

// The directory entry beneath dirfd (never a link); -ENOENT, -ENOTDIR or -errno.
int descend(int dirfd, const std::string& entry, UniqueFd* out) {
  OpenResult r = open_beneath(dirfd, entry, FileType::Directory, O_RDONLY);
  if (!r) return r.error == EUCLEAN || r.error == ELOOP ? -ENOTDIR : -r.error;
  *out = std::move(r.fd);
  return 0;
}

}  // namespace

std::string canonical_path(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view part = path.substr(start, slash - start);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = slash + 1;
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + std::string(p);
  return out;
}

int ForwardPaths::encrypt_path(const std::string& plain, std::string* out) {
  out->clear();
  if (plain.empty()) return 0;
  const auto names = components(plain);
  UniqueFd held;
  int dirfd = root_.get();
  std::string label;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].size() > kMaxNameBytes) return -ENAMETOOLONG;
    DirIv iv{};
    if (int rc = ivs_.read(dirfd, &iv, FileLabel(label)); rc < 0) return rc;
    std::string entry = names_.to_disk(names[i], iv).entry;
    struct stat st {};
    if (!bad_names_.empty() && ::fstatat(dirfd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      if (auto e = find_bad_name_entry(names_, dirfd, names[i], iv, bad_names_)) entry = *e;
    *out += (out->empty() ? "" : "/") + entry;
    if (i + 1 == names.size()) break;
    UniqueFd next;
    if (int rc = descend(dirfd, entry, &next); rc < 0) return rc;
    held = std::move(next);
    dirfd = held.get();
    label = *out;
  }
  return 0;
}

int ForwardPaths::decrypt_path(const std::string& cipher, std::string* out) {
  out->clear();
  if (cipher.empty()) return 0;
  const auto entries = components(cipher);
  UniqueFd held;
  int dirfd = root_.get();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].size() > kMaxNameBytes) return -ENAMETOOLONG;
    DirIv iv{};
    if (int rc = ivs_.read(dirfd, &iv, FileLabel(cipher)); rc < 0) return rc;
    auto plain = names_.to_plain(dirfd, entries[i], iv);
    if (!plain && !bad_names_.empty()) plain = shown_bad_name(names_, dirfd, entries[i], iv, bad_names_);
    if (!plain) return -EBADMSG;
    *out += (out->empty() ? "" : "/") + *plain;
    if (i + 1 == entries.size()) break;
    UniqueFd next;
    if (int rc = descend(dirfd, entries[i], &next); rc < 0) return rc;
    held = std::move(next);
    dirfd = held.get();
  }
  return 0;
}

}  // namespace gcfs
