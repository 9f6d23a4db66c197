// fsck's walk: depth first through CIPHERDIR without recursion, each entry's name decrypted (or
// reported) and the entry checked by its type; unreadable items are scheduled for --repair.
#include "fs/fsck/checker.h"
#include "fs/conflict_names.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gcfs::fsck {

// Depth first, without recursion: `frames` is the path from CIPHERDIR to the directory being
// read, each level holding its own listing, so memory grows with the depth and the widest
// listing on the way, never with the whole tree.
void Checker::walk(DirChain& chain) {
  std::vector<Frame> frames(1);
  enter_dir(chain, frames);
  while (!frames.empty()) {
    Frame& f = frames.back();
    if (chain.top() < 0) {
      lost_dir(frames);
    } else if (f.next < f.names.size()) {
      const std::string name = f.names[f.next++];
      check_name(chain, frames, name);  // may descend: a new frame on top
      continue;
    } else {
      finish_dir(chain.top(), frames.back(), frames);
    }
    pop_path(frames.back());
    frames.pop_back();
    if (!frames.empty()) chain.ascend();
  }
}

// The walk just descended into the directory of frames.back(): read its IV and its listing.
void Checker::enter_dir(DirChain& chain, std::vector<Frame>& frames) {
  ++report_.directories;
  Frame& f = frames.back();
  f.have_iv = read_iv(chain.top(), frames, &f.iv);
  auto listed = list_dir(chain.top());
  if (!listed) {
    const std::string crel = dir_crel();
    problem(crel.empty() ? "." : crel, dir_plain(frames), std::string("cannot list the directory: ") + std::strerror(errno),
            false);
    return;
  }
  f.names = std::move(*listed);
}

// The walk cannot get back to the directory at the top (its descriptor was closed and ".." of
// the level below is no longer it): what it still holds is neither checked nor moved, since no
// path would be sure to lead to the same place.
void Checker::lost_dir(const std::vector<Frame>& frames) {
  const Frame& f = frames.back();
  const std::string crel = dir_crel();
  problem(crel.empty() ? "." : crel, dir_plain(frames),
          "fsck lost its way back to this directory (something on the way was moved or replaced while it "
          "ran): the rest of it was not checked",
          false);
  for (const PendingMove& m : f.moves)
    report_.problems[m.problem].what += "; not moved: the way back to its directory changed during the check";
}

void Checker::finish_dir(int dirfd, Frame& f, const std::vector<Frame>& frames) {
  // A long symlink target's file that no symlink here holds: left over (a crash between
  // writing it and making its link), or its link is gone or damaged.
  for (const std::string& name : f.long_target_files) {
    if (f.long_targets_used.count(name)) continue;
    const std::size_t i = problem(join(dir_crel(), name), std::nullopt,
                                  "long symlink target file without a readable symlink that holds it (left over, or "
                                  "its symlink was removed or damaged)" + in_dir(dir_plain(frames)),
                                  true);
    schedule_move(dirfd, f, name, i, false);
  }
  if (f.bad_names.size() >= 2 && f.bad_names.size() == f.named && !vault_.dir_ivs().deterministic())
    for (std::size_t i : f.bad_names)
      report_.problems[i].what += "; no name in this directory decrypts, so its " + std::string(kDirIvFileName) +
                                  " is probably damaged or replaced";
  for (const PendingMove& m : f.moves) move_aside(dirfd, m);
}

std::string Checker::in_dir(const std::optional<std::string>& plain) {
  return plain ? " in plaintext directory " + *plain : "";
}

// One entry of the directory at the top of the walk.
void Checker::check_name(DirChain& chain, std::vector<Frame>& frames, const std::string& name) {
  Frame& f = frames.back();
  if (skipped_entry(name, frames.size() == 1)) return;
  ++progress_.done_entries;
  report_progress();
  const int dirfd = chain.top();
  const auto present = [&](const std::string& n) { return std::binary_search(f.names.begin(), f.names.end(), n); };
  const std::optional<std::string> no_name;
  const Where where{dir_crel(), plain_dir(frames), name, no_name};

  if (is_long_target_file(name)) {  // checked with the symlinks that hold it (finish_dir)
    f.long_target_files.push_back(name);
    return;
  }
  if (name.starts_with(kLongNamePrefix) && name.ends_with(kLongNameSuffix)) {
    const std::string entry = name.substr(0, name.size() - kLongNameSuffix.size());
    if (!present(entry)) {
      const std::size_t i = problem(where.cipher(), std::nullopt,
                                    "long-name file without its entry " + entry +
                                        " (left over, or its entry was removed)" + in_dir(dir_plain(frames)),
                                    true);
      schedule_move(dirfd, f, name, i, false);
    }
    return;
  }

  std::optional<std::string> pname;
  bool bad_name = false;
  std::string why;
  if (!f.have_iv) {
    // Reported once for the directory; entries have no plaintext name but are still checked.
  } else if (is_long_name_entry(name)) {
    pname = long_name(dirfd, name, f.iv, &why);
    bad_name = !pname;
  } else if (is_internal_entry(name)) {
    const std::size_t i = problem(where.cipher(), std::nullopt,
                                  "not a file gpucryptfs writes (a name with a dot that is none of its own)" +
                                      conflict_hint(dirfd, name, f) + in_dir(dir_plain(frames)),
                                  true);
    schedule_move(dirfd, f, name, i, false);
    return;
  } else if (name.size() > vault_.names().long_name_max()) {
    bad_name = true;
    why = "name longer than the vault's longest backing name (" + std::to_string(vault_.names().long_name_max()) +
          " bytes, init --longnamemax), which the long form holds instead: a second spelling, never written here";
  } else {
    pname = names_.decrypt(name, f.iv);
    if (!pname) {
      bad_name = true;
      why = "name does not decrypt (damaged, from another vault, or moved from another directory)";
    }
  }
  ++f.named;
  std::optional<std::size_t> bad;
  if (bad_name) why += conflict_hint(dirfd, name, f);
  if (bad_name) {
    bad = problem(where.cipher(), std::nullopt, why + in_dir(dir_plain(frames)), true);
    f.bad_names.push_back(*bad);
  }
  // An item whose name does not decrypt is reported (and moved aside) as a whole; only a
  // directory's contents are still worth checking one by one.
  const bool with_name_file = bad_name && is_long_name_entry(name) && present(name + std::string(kLongNameSuffix));
  check_entry(chain, frames, name, pname, bad, with_name_file);
}

// Only when --repair runs, can use lost+found, and nothing above the item is moved already.
bool Checker::schedule_move(int dirfd, Frame& f, const std::string& name, std::size_t problem_index, bool with_name_file,
                   const struct stat* seen) {
  if (!options_.repair || f.moving || !report_.repair_refused.empty()) return false;
  struct stat st {};
  if (seen) st = *seen;
  else if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  f.moves.push_back({name, st.st_dev, st.st_ino, problem_index, with_name_file});
  return true;
}

void Checker::check_entry(DirChain& chain, std::vector<Frame>& frames, const std::string& name,
                 const std::optional<std::string>& pname, std::optional<std::size_t> bad_name, bool with_name_file) {
  Frame& f = frames.back();
  const int dirfd = chain.top();
  const Where where{dir_crel(), plain_dir(frames), name, pname};
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    problem(where.cipher(), where.plain(), std::string("cannot stat: ") + std::strerror(errno), false);
    return;
  }
  const bool contents = !bad_name;
  const bool moving = bad_name && schedule_move(dirfd, f, name, *bad_name, with_name_file, &st);
  if (S_ISDIR(st.st_mode)) {
    OpenResult sub = chain.descend(name);
    if (sub.error) {
      problem(where.cipher(), where.plain(), "the directory " + describe(sub), false);
      return;
    }
    if (contents) check_xattrs(chain.top(), where);
    Frame child;
    child.plain_known = f.plain_known && pname.has_value();
    child.moving = f.moving || moving;
    push_path(child, name, pname);
    frames.push_back(std::move(child));  // f and where are not used past this point
    enter_dir(chain, frames);
  } else if (!contents) {
    if (S_ISREG(st.st_mode)) progress_.done_bytes += bytes_to_check(st);
  } else if (S_ISREG(st.st_mode)) {
    ++report_.files;
    OpenResult file = open_beneath(dirfd, name, FileType::Regular, O_RDONLY);
    if (!file) {
      problem(where.cipher(), where.plain(), "the file " + describe(file), false);
      return;
    }
    if (::fstat(file.fd.get(), &st) != 0) {
      problem(where.cipher(), where.plain(), std::string("cannot stat: ") + std::strerror(errno), false);
      return;
    }
    check_xattrs(file.fd.get(), where);
    // Hard links share one ciphertext: read it once.
    if (st.st_nlink > 1 && !seen_.insert({st.st_dev, st.st_ino}).second) {
      progress_.done_bytes += bytes_to_check(st);
      return;
    }
    const std::size_t before = report_.problems.size();
    check_content(file.fd.get(), static_cast<std::uint64_t>(st.st_size), dirfd, where);
    for (std::size_t i = before; i < report_.problems.size(); ++i)
      if (report_.problems[i].unreadable) {
        schedule_move(dirfd, f, name, i, false, &st);
        break;
      }
  } else if (S_ISLNK(st.st_mode)) {
    ++report_.symlinks;
    auto link = NameMapping::read_link(dirfd, name.c_str());
    if (!link) {
      problem(where.cipher(), where.plain(), std::string("cannot read the symlink: ") + std::strerror(errno), false);
      return;
    }
    std::string why;
    if (vault_.names().read_symlink(dirfd, *link, &why)) {
      if (is_long_target_file(*link)) f.long_targets_used.insert(*link);
    } else {
      const std::size_t i = problem(where.cipher(), where.plain(), why, true);
      schedule_move(dirfd, f, name, i, false, &st);
    }
  } else {
    ++report_.others;  // fifos, sockets, device nodes: nothing encrypted but the name, never opened
  }
}

std::string Checker::conflict_hint(int dirfd, const std::string& name, const Frame& f) const {
  if (!f.have_iv || !is_conflict_copy(vault_.names(), dirfd, name, f.iv)) return "";
  return "; it is a sync client's conflict copy of a name here: a mount with --badname shows it under a readable "
         "name, to rename or delete (--repair would move it to gpucryptfs.lost+found)";
}

}  // namespace gcfs::fsck
