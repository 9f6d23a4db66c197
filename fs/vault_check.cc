#include "fs/vault_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "crypto/base64url.h"
#include "fs/chunk_auth.h"
#include "fs/chunk_io.h"
#include "fs/chunk_journal.h"
#include "fs/content/content_format.h"
#include "fs/plain_io.h"
#include "fs/dir_chain.h"
#include "fs/dir_iv.h"
#include "fs/file_header.h"
#include "fs/journal_recovery.h"
#include "fs/log.h"
#include "fs/safe_open.h"
#include "fs/unique_fd.h"

namespace gcfs {
namespace {

// Ciphertext read per engine batch: large enough to keep every engine thread busy.
constexpr std::uint64_t kBatchBytes = 8u << 20;
// A long name's .name file holds one encrypted name; anything this big is not one.
constexpr std::size_t kMaxNameFileBytes = 4095;

std::string join(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }
std::string plain_join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// The names in a directory, sorted so reports and repairs do not depend on readdir order.
std::optional<std::vector<std::string>> list_dir(int dirfd) {
  int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return std::nullopt;
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return std::nullopt;
  }
  ::rewinddir(d);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// At most 8 runs of chunk numbers in one problem line.
std::string describe_runs(const std::vector<std::uint64_t>& chunks) { return describe_chunk_runs(chunks, 8); }

bool is_leftover_temp(std::string_view name) {
  // Atomic writes of the config and of directory IVs go through NAME.tmp and a rename; a crash
  // between the two leaves the temporary behind, which is harmless.
  return name == std::string(kConfigFileName) + ".tmp" || name == std::string(kDirIvFileName) + ".tmp";
}

// Names the walk never checks as entries: the vault's own files, and at the top its config,
// journal and lost+found.
bool skipped_entry(std::string_view name, bool at_root) {
  if (at_root && (name == kConfigFileName || name == kLostFoundDirName || name == kJournalFileName)) return true;
  return name == kDirIvFileName || is_leftover_temp(name);
}

// What open_beneath found, for a message that starts with the item: "is a FIFO, not what the
// vault keeps there", "is or passes through a symbolic link (...)", "cannot be opened (EACCES...)".
// What fsck reads of a regular file: its allocated bytes, at most its size. Holes (unallocated
// ranges) are skipped with SEEK_DATA, so progress follows the data, not the logical size.
std::uint64_t bytes_to_check(const struct stat& st) {
  const std::uint64_t allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
  return std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), allocated);
}

std::string describe(const OpenResult& r) {
  if (r.error == EUCLEAN || r.error == ELOOP || r.error == EXDEV) return r.why();
  return "cannot be opened (" + r.why() + ")";
}

std::string sha256_base64url(std::string_view s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr) != 1) throw std::runtime_error("SHA-256 failed");
  return base64url_encode({md, len});
}

// A name for the lost+found index: control characters (a newline or tab in a planted file name)
// are written as \xNN, so every move stays one line of four tab-separated fields.
std::string index_field(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// write(2) until all of s is out (the index is opened O_APPEND, where pwrite would ignore its offset).
bool append_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// An unreadable item that --repair moves aside once its directory has been read: its name in
// that directory and the inode the check saw there, so only that very item is ever moved.
struct PendingMove {
  std::string name;
  dev_t dev = 0;
  ino_t ino = 0;
  std::size_t problem = 0;       // index into the report's problems
  bool with_name_file = false;   // a long name's .name file goes along
};

// One directory of the walk.
struct Frame {
  std::string name;        // its entry in the parent ("" for CIPHERDIR)
  std::string plain_name;  // its plaintext name, when plain_known
  bool plain_known = true; // every name from CIPHERDIR down to it decrypts
  bool have_iv = false;
  DirIv iv{};
  std::vector<std::string> names;  // what it holds, sorted; entries are read in this order
  std::size_t next = 0;
  std::vector<std::size_t> bad_names;  // indexes into the report's problems
  std::size_t named = 0;
  bool moving = false;  // it, or a directory above it, is moved aside as a whole
  std::vector<PendingMove> moves;
  std::vector<std::string> long_target_files;      // gcfs.longtarget.* files it holds
  std::set<std::string> long_targets_used;         // those a symlink in it holds and that read
};

// CIPHERDIR-relative path of the directory at the top of the walk ("" for CIPHERDIR). Built only
// when a message needs it: keeping it in every level would cost memory quadratic in the depth.
std::string dir_crel(const std::vector<Frame>& frames) {
  std::string out;
  for (std::size_t i = 1; i < frames.size(); ++i) out = join(out, frames[i].name);
  return out;
}

// Its plaintext path ("/" for CIPHERDIR), nullopt when a name on the way does not decrypt.
std::optional<std::string> dir_plain(const std::vector<Frame>& frames) {
  if (!frames.back().plain_known) return std::nullopt;
  std::string out = "/";
  for (std::size_t i = 1; i < frames.size(); ++i) out = plain_join(out, frames[i].plain_name);
  return out;
}

// An entry of the directory at the top of the walk, for messages.
struct Where {
  const std::vector<Frame>& frames;
  const std::string& name;
  const std::optional<std::string>& pname;  // its plaintext name, when it decrypts
  std::string cipher() const { return join(dir_crel(frames), name); }
  std::optional<std::string> plain() const {
    auto dir = dir_plain(frames);
    if (!dir || !pname) return std::nullopt;
    return plain_join(*dir, *pname);
  }
};

// rename(2) that never replaces what is at the target: RENAME_NOREPLACE where the filesystem has
// it, else a look first (what a race could then replace is an entry of lost+found, inside the
// vault, never anything outside it).
int rename_noreplace(int from_dir, const std::string& from, int to_dir, const std::string& to) {
  if (::renameat2(from_dir, from.c_str(), to_dir, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  struct stat st {};
  if (::fstatat(to_dir, to.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    errno = EEXIST;
    return -1;
  }
  return ::renameat(from_dir, from.c_str(), to_dir, to.c_str());
}

class Checker {
 public:
  Checker(const Vault& vault, ChunkEngine& engine, const FsckOptions& options)
      : vault_(vault), engine_(engine), options_(options), names_(vault.keys().names_key()) {}

  FsckReport run() {
    UniqueFd root(::open(vault_.cipherdir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root) throw UserError("cannot open CIPHERDIR " + vault_.cipherdir() + ": " + std::strerror(errno));
    DirChain chain(std::move(root));
    root_fd_ = chain.root();
    check_lost_found_shape();
    load_journal();
    count();
    report_progress(true);
    walk(chain);
    progress_.done_bytes = progress_.total_bytes;  // long-name files and the like are counted, not read
    progress_.done_entries = progress_.total_entries;
    report_progress(true);
    if (journal_lock_ && ChunkJournal::invalidate_records(vault_.journal_path(), vault_.config().chunk_size, journal_) == 0)
      journal_.clear();  // dealt with: what was restorable is restored
    return std::move(report_);
  }

 private:
  // The crash journal's valid records: pre-images of rewrites a killed daemon may have torn.
  // Anything but a regular file there is damage to report, never something to open.
  void load_journal() {
    OpenResult look = open_beneath(root_fd_, kJournalFileName, FileType::Regular, O_PATH);
    if (look.error == ENOENT) return;
    if (!look) {
      problem(kJournalFileName, std::nullopt,
              "crash journal " + describe(look) + ": it was not read, so no torn chunk can be restored from it",
              false);
      return;
    }
    // Records are authenticated with the vault's journal key, bounded, and read beneath root_fd_.
    JournalScan scan = ChunkJournal::scan(root_fd_, vault_.keys(), vault_.config().chunk_size);
    if (!scan.damage.empty())
      problem(kJournalFileName, std::nullopt, "crash journal: " + scan.damage, false);
    journal_ = std::move(scan.records);
    for (const auto& r : journal_) journal_by_id_[r.file_id].push_back(&r);
    if (options_.repair && !journal_.empty()) {
      // Restoring takes the journal's lock, as a mount does: never while a daemon writes.
      if (options_.journal_lock_fd >= 0) {
        journal_lock_ = UniqueFd(::fcntl(options_.journal_lock_fd, F_DUPFD_CLOEXEC, 0));  // the caller's lock
      } else {
        OpenResult lock = open_beneath(root_fd_, kJournalFileName, FileType::Regular, O_RDWR);
        if (lock && ::flock(lock.fd.get(), LOCK_EX | LOCK_NB) == 0) journal_lock_ = std::move(lock.fd);
      }
    }
  }

  // gpucryptfs.lost+found and its index must be a real directory and a regular file of their own
  // (no link, no FIFO, no second hard link): otherwise --repair would move files or write lines
  // wherever they lead. Anything else is reported, and --repair then moves nothing.
  void check_lost_found_shape() {
    OpenResult dir = open_beneath(root_fd_, kLostFoundDirName, FileType::Directory, O_PATH);
    if (dir.error == ENOENT) return;
    if (!dir) {
      refuse_repair(kLostFoundDirName, describe(dir));
      return;
    }
    const std::string index = join(kLostFoundDirName, kLostFoundIndexName);
    OpenResult idx = open_beneath(dir.fd.get(), kLostFoundIndexName, FileType::Regular, O_PATH);
    struct stat st {};
    if (idx.error == ENOENT) return;
    if (!idx) refuse_repair(index, describe(idx));
    else if (::fstat(idx.fd.get(), &st) == 0 && st.st_nlink != 1)
      refuse_repair(index, "has " + std::to_string(st.st_nlink) + " hard links (one may be a file outside the vault)");
  }

  void refuse_repair(const std::string& cpath, const std::string& why) {
    const std::string what = cpath + " " + why +
                             ": fsck --repair does not use it and moves nothing; remove or rename it (it may lead "
                             "outside the vault), then run the repair again";
    problem(cpath, std::nullopt, what, false);
    if (report_.repair_refused.empty()) report_.repair_refused = cpath + " " + why;
  }

  // The pre-pass: how much there is to read, for the progress bar. Iterative, like the check.
  void count() {
    UniqueFd dup(::fcntl(root_fd_, F_DUPFD_CLOEXEC, 0));
    if (!dup) return;
    DirChain chain(std::move(dup));
    struct Level {
      std::vector<std::string> names;
      std::size_t next = 0;
    };
    std::vector<Level> stack;
    stack.push_back({list_dir(chain.top()).value_or(std::vector<std::string>{})});
    while (!stack.empty()) {
      Level& level = stack.back();
      if (chain.top() < 0 || level.next == level.names.size()) {
        stack.pop_back();
        if (!stack.empty()) chain.ascend();
        continue;
      }
      const std::string name = level.names[level.next++];
      if (skipped_entry(name, stack.size() == 1)) continue;
      struct stat st {};
      if (::fstatat(chain.top(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      ++progress_.total_entries;
      if (S_ISREG(st.st_mode)) progress_.total_bytes += bytes_to_check(st);
      if (S_ISDIR(st.st_mode) && chain.descend(name).error == 0)
        stack.push_back({list_dir(chain.top()).value_or(std::vector<std::string>{})});
    }
  }

  void report_progress(bool force = false) {
    if (!options_.progress) return;
    if (!force && ++calls_ % 16 != 0) return;
    options_.progress(progress_);
  }

  // Adds a problem; returns its index in the report.
  std::size_t problem(std::string cipher_path, std::optional<std::string> plain_path, std::string what, bool unreadable) {
    FsckProblem p;
    p.cipher_path = std::move(cipher_path);
    p.plain_path = plain_path.value_or("");
    p.what = std::move(what);
    p.unreadable = unreadable;
    report_.problems.push_back(std::move(p));
    return report_.problems.size() - 1;
  }

  // Depth first, without recursion: `frames` is the path from CIPHERDIR to the directory being
  // read, each level holding its own listing, so memory grows with the depth and the widest
  // listing on the way, never with the whole tree.
  void walk(DirChain& chain) {
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
      frames.pop_back();
      if (!frames.empty()) chain.ascend();
    }
  }

  // The walk just descended into the directory of frames.back(): read its IV and its listing.
  void enter_dir(DirChain& chain, std::vector<Frame>& frames) {
    ++report_.directories;
    Frame& f = frames.back();
    f.have_iv = read_iv(chain.top(), frames, &f.iv);
    auto listed = list_dir(chain.top());
    if (!listed) {
      const std::string crel = dir_crel(frames);
      problem(crel.empty() ? "." : crel, dir_plain(frames), std::string("cannot list the directory: ") + std::strerror(errno),
              false);
      return;
    }
    f.names = std::move(*listed);
  }

  // The walk cannot get back to the directory at the top (its descriptor was closed and ".." of
  // the level below is no longer it): what it still holds is neither checked nor moved, since no
  // path would be sure to lead to the same place.
  void lost_dir(const std::vector<Frame>& frames) {
    const Frame& f = frames.back();
    const std::string crel = dir_crel(frames);
    problem(crel.empty() ? "." : crel, dir_plain(frames),
            "fsck lost its way back to this directory (something on the way was moved or replaced while it "
            "ran): the rest of it was not checked",
            false);
    for (const PendingMove& m : f.moves)
      report_.problems[m.problem].what += "; not moved: the way back to its directory changed during the check";
  }

  void finish_dir(int dirfd, Frame& f, const std::vector<Frame>& frames) {
    // A long symlink target's file that no symlink here holds: left over (a crash between
    // writing it and making its link), or its link is gone or damaged.
    for (const std::string& name : f.long_target_files) {
      if (f.long_targets_used.count(name)) continue;
      const std::size_t i = problem(join(dir_crel(frames), name), std::nullopt,
                                    "long symlink target file without a readable symlink that holds it (left over, or "
                                    "its symlink was removed or damaged)" + in_dir(dir_plain(frames)),
                                    true);
      schedule_move(dirfd, f, name, i, false);
    }
    if (f.bad_names.size() >= 2 && f.bad_names.size() == f.named)
      for (std::size_t i : f.bad_names)
        report_.problems[i].what += "; no name in this directory decrypts, so its " + std::string(kDirIvFileName) +
                                    " is probably damaged or replaced";
    for (const PendingMove& m : f.moves) move_aside(dirfd, m);
  }

  static std::string in_dir(const std::optional<std::string>& plain) {
    return plain ? " in plaintext directory " + *plain : "";
  }

  // One entry of the directory at the top of the walk.
  void check_name(DirChain& chain, std::vector<Frame>& frames, const std::string& name) {
    Frame& f = frames.back();
    if (skipped_entry(name, frames.size() == 1)) return;
    ++progress_.done_entries;
    report_progress();
    const int dirfd = chain.top();
    const auto present = [&](const std::string& n) { return std::binary_search(f.names.begin(), f.names.end(), n); };
    const std::optional<std::string> no_name;
    const Where where{frames, name, no_name};

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
                                        in_dir(dir_plain(frames)),
                                    true);
      schedule_move(dirfd, f, name, i, false);
      return;
    } else {
      pname = names_.decrypt(name, f.iv);
      if (!pname) {
        bad_name = true;
        why = "name does not decrypt (damaged, from another vault, or moved from another directory)";
      }
    }
    ++f.named;
    std::optional<std::size_t> bad;
    if (bad_name) {
      bad = problem(where.cipher(), std::nullopt, why + in_dir(dir_plain(frames)), true);
      f.bad_names.push_back(*bad);
    }
    // An item whose name does not decrypt is reported (and moved aside) as a whole; only a
    // directory's contents are still worth checking one by one.
    const bool with_name_file = bad_name && is_long_name_entry(name) && present(name + std::string(kLongNameSuffix));
    check_entry(chain, frames, name, pname, bad, with_name_file);
  }

  // A long name: its .name file, read beneath the directory (a regular file of at most a few KiB,
  // nothing else is opened), must hash to the entry, be too long for an entry of its own, and
  // decrypt. nullopt with *why saying which of these fails.
  std::optional<std::string> long_name(int dirfd, const std::string& entry, const DirIv& iv, std::string* why) {
    const std::string file = entry + std::string(kLongNameSuffix);
    OpenResult r = open_beneath(dirfd, file, FileType::Regular, O_RDONLY);
    std::vector<std::uint8_t> raw;
    if (!r) {
      *why = "long name whose " + file + " file " + (r.error == ENOENT ? std::string("is missing") : describe(r));
      return std::nullopt;
    }
    if (read_capped(r.fd.get(), kMaxNameFileBytes, &raw) != 0 || raw.empty()) {
      *why = "long name whose " + file + " file is unreadable, empty or too big for a name";
      return std::nullopt;
    }
    const std::string encoded(raw.begin(), raw.end());
    // The hash check comes first: otherwise a swapped .name file could rename entries.
    if (std::string(kLongNamePrefix) + sha256_base64url(encoded) == entry && encoded.size() > kMaxNameBytes)
      if (auto plain = names_.decrypt(encoded, iv)) return plain;
    if (encoded.size() <= kMaxNameBytes)
      *why = "long-name entry holding a name short enough for its own entry (a planted second spelling)";
    else if (names_.decrypt(encoded, iv))
      *why = "long name whose .name file does not match its hash (swapped or edited)";
    else
      *why = "long name that does not decrypt (damaged, from another vault, or moved from another directory)";
    return std::nullopt;
  }

  bool read_iv(int dirfd, const std::vector<Frame>& frames, DirIv* iv) {
    auto cpath = [&] { return join(dir_crel(frames), kDirIvFileName); };
    OpenResult r = open_beneath(dirfd, kDirIvFileName, FileType::Regular, O_RDONLY);
    if (!r) {
      problem(cpath(), dir_plain(frames),
              std::string("directory IV ") + (r.error == ENOENT ? std::string("missing") : describe(r)) +
                  ": no name in this directory can be decrypted",
              false);
      return false;
    }
    std::vector<std::uint8_t> buf;
    const int rc = read_capped(r.fd.get(), kDirIvBytes, &buf);
    if (rc != 0 || buf.size() != kDirIvBytes) {
      struct stat st {};
      const long long size = ::fstat(r.fd.get(), &st) == 0 ? static_cast<long long>(st.st_size) : 0;
      problem(cpath(), dir_plain(frames),
              (rc == 0 || rc == -EFBIG ? "directory IV has " + std::to_string(size) + " bytes instead of 16"
                                       : std::string("directory IV cannot be read: ") + std::strerror(-rc)) +
                  ": no name in this directory can be decrypted",
              false);
      return false;
    }
    std::copy(buf.begin(), buf.end(), iv->begin());
    return true;
  }

  // Only when --repair runs, can use lost+found, and nothing above the item is moved already.
  bool schedule_move(int dirfd, Frame& f, const std::string& name, std::size_t problem_index, bool with_name_file,
                     const struct stat* seen = nullptr) {
    if (!options_.repair || f.moving || !report_.repair_refused.empty()) return false;
    struct stat st {};
    if (seen) st = *seen;
    else if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    f.moves.push_back({name, st.st_dev, st.st_ino, problem_index, with_name_file});
    return true;
  }

  void check_entry(DirChain& chain, std::vector<Frame>& frames, const std::string& name,
                   const std::optional<std::string>& pname, std::optional<std::size_t> bad_name, bool with_name_file) {
    Frame& f = frames.back();
    const int dirfd = chain.top();
    const Where where{frames, name, pname};
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
      child.name = name;
      child.plain_known = f.plain_known && pname.has_value();
      child.plain_name = pname.value_or("");
      child.moving = f.moving || moving;
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

  void check_xattrs(int fd, const Where& where) {
    ssize_t len = ::flistxattr(fd, nullptr, 0);
    if (len <= 0) return;  // none, or a filesystem without xattrs
    std::string list(static_cast<std::size_t>(len), '\0');
    len = ::flistxattr(fd, list.data(), list.size());
    if (len <= 0) return;
    list.resize(static_cast<std::size_t>(len));
    for (std::size_t pos = 0; pos < list.size();) {
      const std::string stored(list.c_str() + pos);
      pos += stored.size() + 1;
      if (!NameMapping::is_stored_xattr_name(stored)) continue;
      ++report_.xattrs;
      auto pname = vault_.names().decrypt_xattr_name(stored);
      if (!pname) {
        problem(where.cipher(), where.plain(), "extended attribute " + stored + ": its name does not decrypt", false);
        continue;
      }
      ssize_t vlen = ::fgetxattr(fd, stored.c_str(), nullptr, 0);
      std::vector<std::uint8_t> value(vlen > 0 ? static_cast<std::size_t>(vlen) : 0);
      if (vlen >= 0) vlen = ::fgetxattr(fd, stored.c_str(), value.data(), value.size());
      if (vlen < 0) {
        problem(where.cipher(), where.plain(), "extended attribute " + *pname + ": cannot read it: " + std::strerror(errno),
                false);
        continue;
      }
      value.resize(static_cast<std::size_t>(vlen));
      if (!vault_.names().decrypt_xattr_value(stored, value))
        problem(where.cipher(), where.plain(),
                "extended attribute " + *pname + ": its value does not decrypt (damaged or moved)", false);
    }
  }

  // Chunks of a file that fail (or a size that is impossible) which the crash journal can put
  // back. With --repair (and the journal's lock) they are restored and the file is checked
  // again: returns true, all is reported. Otherwise returns false and sets *note to append to
  // the problem ("" when the journal cannot help).
  bool try_journal(int fd, const FileId& id, int dirfd, const Where& where, std::string* note) {
    auto it = journal_by_id_.find(id);
    if (it == journal_by_id_.end()) return false;
    const RestorePlan plan = restore_from_records(fd, id, it->second, vault_.layout(), vault_.keys(), engine_, false);
    if (plan.chunks.empty()) return false;
    if (journal_lock_) {
      // For writing, the same name beneath the same directory descriptor, and the same inode.
      OpenResult rw = open_beneath(dirfd, where.name, FileType::Regular, O_RDWR);
      struct stat was {}, now {};
      if (rw && ::fstat(fd, &was) == 0 && ::fstat(rw.fd.get(), &now) == 0 && was.st_dev == now.st_dev &&
          was.st_ino == now.st_ino) {
        const std::string cpath = where.cipher();
        const RestorePlan done =
            restore_from_records(rw.fd.get(), id, it->second, vault_.layout(), vault_.keys(), engine_, true);
        for (std::uint64_t k : done.chunks) {
          report_.restored.push_back("restored chunk " + std::to_string(k) + " of " + cpath + " from the crash journal");
          log::warning("restored chunk " + std::to_string(k) + " of " + vault_.cipherdir() + "/" + cpath +
                       " from the crash journal");
        }
        struct stat st {};
        if (done.error == 0 && ::fstat(rw.fd.get(), &st) == 0) {
          check_content(rw.fd.get(), static_cast<std::uint64_t>(st.st_size), dirfd, where, /*after_restore=*/true);
          return true;
        }
      }
    }
    *note = std::string("; ") + (plan.chunks.size() == 1 ? "chunk " : "chunks ") + describe_runs(plan.chunks) +
            (plan.chunks.size() == 1 ? " is" : " are") +
            " recoverable from the crash journal: mount the vault or run fsck --repair to restore " +
            (plan.chunks.size() == 1 ? "it" : "them");
    return false;
  }

  // The first chunk at or after `first` that may hold data: chunks wholly inside a hole of a
  // sparse file read as zeros, which the format calls holes, so they are counted without being
  // read (a 1 TiB sparse file is checked in one step). nchunks when only holes follow.
  std::uint64_t next_data_chunk(int fd, std::uint64_t first, std::uint64_t nchunks) const {
    const ChunkLayout& layout = vault_.layout();
    return layout.content().next_data_chunk(layout, fd, first, nchunks);
  }

  void check_content(int fd, std::uint64_t size, int dirfd, const Where& where, bool after_restore = false) {
    const ChunkLayout& layout = vault_.layout();
    if (size == 0) return;  // an empty plaintext file
    // A file checked again after --repair restored chunks was counted the first time.
    const std::uint64_t counts = after_restore ? 0 : 1;
    if (size < kFileHeaderBytes) {
      progress_.done_bytes += size;
      problem(where.cipher(), where.plain(),
              "ciphertext is " + std::to_string(size) + " bytes, shorter than a file header (truncated)", true);
      return;
    }
    std::array<std::uint8_t, kFileHeaderBytes> raw{};
    if (pread_full(fd, raw.data(), raw.size(), 0) != static_cast<ssize_t>(raw.size())) {
      problem(where.cipher(), where.plain(), std::string("cannot read the file header: ") + std::strerror(errno), false);
      return;
    }
    auto header = FileHeader::decode(raw, static_cast<std::uint16_t>(layout.format()));
    if (!header) {
      progress_.done_bytes += size;
      problem(where.cipher(), where.plain(),
              "file header is damaged (not a gpucryptfs version " + std::to_string(layout.format()) +
                  " header): nothing in the file can be read",
              true);
      return;
    }
    auto plain_size = layout.plain_size(size);
    bool size_bad = false;
    std::uint64_t checkable = 0;
    if (plain_size) {
      checkable = *plain_size;
    } else {
      // A torn last chunk (format 1) or a file ending inside a metadata block (format 2): check
      // the whole chunks before it. A format 2 size that no write leaves has none.
      size_bad = true;
      checkable = layout.readable_plain_size(size).value_or(0);
    }
    const ChunkKey key = vault_.keys().content_key(header->id);
    const std::uint64_t C = layout.chunk_size(), D = layout.disk_chunk_size();
    const std::uint64_t nchunks = layout.chunk_count(checkable);
    const std::uint64_t per_batch = std::max<std::uint64_t>(1, kBatchBytes / D);
    // Where chunk k's form ends and begins among the forms of the file's chunks back to back: the
    // bytes read (and, for holes, skipped) are counted in forms, whatever the format.
    const auto disk_end = [&](std::uint64_t k) { return chunk_forms_bytes(layout, 0, k, checkable); };
    const auto disk_begin = [&](std::uint64_t k) {
      return k == 0 ? std::uint64_t{0} : chunk_forms_bytes(layout, 0, k - 1, checkable);
    };
    std::vector<std::uint64_t> bad;
    std::vector<std::uint8_t> ct, pt;
    std::uint64_t opened = 0, accounted = 0;
    for (std::uint64_t first = 0; first < nchunks;) {
      if (const std::uint64_t data = next_data_chunk(fd, first, nchunks); data > first) {
        const std::uint64_t skipped = disk_end(data - 1) - disk_begin(first);
        report_.chunks += (data - first) * counts;
        report_.holes += (data - first) * counts;
        accounted += skipped;  // skipped, not read: not progress (bytes_to_check leaves holes out)
        first = data;
        report_progress();
        continue;
      }
      const std::uint64_t last = std::min(nchunks, first + per_batch) - 1;
      const std::uint64_t begin = disk_begin(first);
      const std::uint64_t end = disk_end(last);
      ct.resize(end - begin);
      pt.resize((last - first + 1) * C);
      // The chunks' forms (nonce | ciphertext | tag), as the format gathers them (chunk_io.h).
      ssize_t n = read_chunk_forms(fd, layout, first, last, checkable, ct.data());
      if (n != static_cast<ssize_t>(ct.size())) {
        problem(where.cipher(), where.plain(),
                std::string("cannot read the ciphertext: ") + (n < 0 ? std::strerror(static_cast<int>(-n)) : "short read"),
                false);
        return;
      }
      const ChunkRunCheck run =
          check_chunk_run(engine_, layout, key, header->id, first, last, checkable, ct.data(), &pt, &bad);
      report_.chunks += (last - first + 1) * counts;
      report_.holes += run.holes * counts;
      opened += run.opened;
      progress_.done_bytes += ct.size() * counts;
      accounted += ct.size();
      report_progress();
      first = last + 1;
    }
    progress_.done_bytes += (size - accounted) * counts;  // the header and a torn tail (holes are in accounted)
    report_.bytes += size * counts;
    std::string journal_note;
    if ((size_bad || !bad.empty()) && !after_restore && try_journal(fd, header->id, dirfd, where, &journal_note)) return;
    const bool recoverable = !journal_note.empty();
    if (size_bad && !layout.readable_plain_size(size)) {
      // A size no write leaves, whole or cut short (format 2: chunk 0 cut short while it moved out
      // of the header block). Nothing reads.
      problem(where.cipher(), where.plain(),
              "ciphertext size " + std::to_string(size) + " is impossible for format " +
                  std::to_string(layout.format()) + " (" + layout.content().why_size_impossible() +
                  "): the mount reads nothing of it" + journal_note,
              !recoverable);
      return;
    }
    if (size_bad) {
      std::uint64_t tail = 0;
      (void)layout.readable_plain_size(size, &tail);
      // The mount reads such a file as its whole chunks (an append cut short between pages
      // leaves exactly this), so it is not unreadable unless its chunks are.
      problem(where.cipher(), where.plain(),
              "ciphertext size " + std::to_string(size) +
                  layout.content().describe_fragment(tail) +
                  ": a write cut short, or a cut; the mount reads the " + std::to_string(nchunks) +
                  " whole chunks before it and drops the fragment at the next write" +
                  (bad.empty() ? std::string() : "; also chunks " + describe_runs(bad) + " fail authentication") +
                  journal_note,
              !recoverable && !bad.empty() && bad.size() == opened);
      return;
    }
    if (bad.empty()) return;
    const bool all_bad = bad.size() == opened;
    std::string what = (bad.size() == 1 ? "chunk " : "chunks ") + describe_runs(bad) + " of " + std::to_string(nchunks) +
                       " (" + std::to_string(C) + " plaintext bytes each) " +
                       (bad.size() == 1 ? "fails" : "fail") + " authentication";
    if (all_bad && opened > 1)
      what += ": every chunk fails, so the header was probably replaced or the file comes from another vault";
    else
      what += ": reading them gives EIO, the other chunks read";
    // A file none of whose chunks read is moved aside by --repair, unless the journal can restore it.
    problem(where.cipher(), where.plain(), what + journal_note, all_bad && !recoverable);
  }

  // --repair, at the first move: CIPHERDIR/gpucryptfs.lost+found as a real directory beneath
  // CIPHERDIR's descriptor, and its index opened beneath that for appending, as a regular file
  // with no other hard link. When either is anything else, nothing is moved at all.
  bool open_lost_found() {
    if (index_) return true;
    if (!report_.repair_refused.empty()) return false;
    if (::mkdirat(root_fd_, kLostFoundDirName, 0700) != 0 && errno != EEXIST) {
      refuse_repair(kLostFoundDirName, std::string("cannot be created (") + std::strerror(errno) + ")");
      return false;
    }
    OpenResult dir = open_beneath(root_fd_, kLostFoundDirName, FileType::Directory, O_RDONLY);
    if (!dir) {
      refuse_repair(kLostFoundDirName, describe(dir));
      return false;
    }
    const std::string index = join(kLostFoundDirName, kLostFoundIndexName);
    OpenResult idx = open_beneath(dir.fd.get(), kLostFoundIndexName, FileType::Regular, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (!idx) {
      refuse_repair(index, describe(idx));
      return false;
    }
    struct stat st {};
    if (::fstat(idx.fd.get(), &st) != 0 || st.st_nlink != 1) {
      refuse_repair(index, "has " + std::to_string(st.st_nlink) + " hard links (one may be a file outside the vault)");
      return false;
    }
    lost_found_ = std::move(dir.fd);
    index_ = std::move(idx.fd);
    return true;
  }

  // Moves one unreadable item from the directory descriptor the check read it through into
  // lost+found: renameat between two held descriptors, so no path is resolved again, and only
  // when the name still holds the inode the check saw.
  void move_aside(int dirfd, const PendingMove& m) {
    FsckProblem& p = report_.problems[m.problem];
    if (!open_lost_found()) {
      p.what += "; not moved: lost+found cannot be used";
      return;
    }
    if (options_.before_move) options_.before_move(p.cipher_path);
    struct stat st {};
    if (::fstatat(dirfd, m.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != m.dev || st.st_ino != m.ino) {
      p.what += "; not moved: it was removed or replaced after the check";
      return;
    }
    const std::string base = m.name.substr(0, 200);
    std::string target;
    int rc = -1;
    for (unsigned n = 1; n < 1000000; ++n) {
      target = std::to_string(n) + "-" + base;
      rc = rename_noreplace(dirfd, m.name, lost_found_.get(), target);
      if (rc == 0 || errno != EEXIST) break;
    }
    if (rc != 0) {
      p.what += std::string("; could not move it aside: ") + std::strerror(errno);
      return;
    }
    if (m.with_name_file) {
      const std::string suffix(kLongNameSuffix);
      (void)rename_noreplace(dirfd, m.name + suffix, lost_found_.get(), target + suffix);
    }
    p.moved_to = join(kLostFoundDirName, target);
    const std::string line = index_field(target) + "\tfrom " + index_field(p.cipher_path) + "\tplaintext " +
                             (p.plain_path.empty() ? "(unknown)" : index_field(p.plain_path)) + "\t" +
                             index_field(p.what) + "\n";
    if (!append_all(index_.get(), line)) log::warning(std::string("cannot write the lost+found index: ") + std::strerror(errno));
  }

  const Vault& vault_;
  ChunkEngine& engine_;
  const FsckOptions& options_;
  NameCipher names_;
  FsckReport report_;
  FsckProgress progress_;
  std::uint64_t calls_ = 0;
  int root_fd_ = -1;  // CIPHERDIR, held by the walk's DirChain for the whole run
  std::set<std::pair<dev_t, ino_t>> seen_;
  std::vector<JournalRecord> journal_;
  std::map<FileId, std::vector<const JournalRecord*>> journal_by_id_;
  UniqueFd journal_lock_;  // held while --repair restores from the journal
  UniqueFd lost_found_, index_;  // --repair, from the first move on
};

}  // namespace

FsckReport check_vault(const Vault& vault, ChunkEngine& engine, const FsckOptions& options) {
  return Checker(vault, engine, options).run();
}

}  // namespace gcfs
