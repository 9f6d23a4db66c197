// fsck's run: the crash journal's records (and its lock, for --repair), the shape of
// lost+found, the pre-pass that sizes the progress bar, and the report's problems.
#include "fs/fsck/checker.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gcfs::fsck {

FsckReport Checker::run() {
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

// The crash journal's valid records: pre-images of rewrites a killed daemon may have torn.
// Anything but a regular file there is damage to report, never something to open.
void Checker::load_journal() {
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
void Checker::check_lost_found_shape() {
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

void Checker::refuse_repair(const std::string& cpath, const std::string& why) {
  const std::string what = cpath + " " + why +
                           ": fsck --repair does not use it and moves nothing; remove or rename it (it may lead "
                           "outside the vault), then run the repair again";
  problem(cpath, std::nullopt, what, false);
  if (report_.repair_refused.empty()) report_.repair_refused = cpath + " " + why;
}

// The pre-pass: how much there is to read, for the progress bar. Iterative, like the check.
void Checker::count() {
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

void Checker::report_progress(bool force) {
  if (!options_.progress) return;
  if (!force && ++calls_ % 16 != 0) return;
  options_.progress(progress_);
}

// Adds a problem; returns its index in the report.
std::size_t Checker::problem(std::string cipher_path, std::optional<std::string> plain_path, std::string what, bool unreadable) {
  FsckProblem p;
  p.cipher_path = std::move(cipher_path);
  p.plain_path = plain_path.value_or("");
  p.what = std::move(what);
  p.unreadable = unreadable;
  report_.problems.push_back(std::move(p));
  return report_.problems.size() - 1;
}

}  // namespace gcfs::fsck

namespace gcfs {

FsckReport check_vault(const Vault& vault, ChunkEngine& engine, const FsckOptions& options) {
  return fsck::Checker(vault, engine, options).run();
}

}  // namespace gcfs
