// fsck's checker (vault_check.h): the state of one run and the steps it takes, in one file per
// concept: checker.cc (the run, the crash journal, progress, problems), walk.cc (the tree and
// each entry in it), names.cc (long names, directory IVs, extended attributes), content.cc (file
// headers, sizes and chunks, as the vault's content format lays them out), repair.cc
// (lost+found and the moves into it), paths.cc (the small helpers they share).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crypto/chunk_engine.h"
#include "fs/chunk_journal.h"
#include "fs/dir_chain.h"
#include "fs/dir_iv.h"
#include "fs/fsck/vault_check.h"
#include "fs/journal_record.h"
#include "fs/name_mapping.h"
#include "fs/safe_open.h"
#include "fs/unique_fd.h"
#include "fs/vault.h"

namespace gcfs::fsck {

// Ciphertext read per engine batch: large enough to keep every engine thread busy.
constexpr std::uint64_t kBatchBytes = 8u << 20;
// A long name's .name file holds one encrypted name; anything this big is not one.
constexpr std::size_t kMaxNameFileBytes = 4095;

std::string join(const std::string& dir, const std::string& name);
std::string plain_join(const std::string& dir, const std::string& name);
// The names in a directory, sorted so reports and repairs do not depend on readdir order.
std::optional<std::vector<std::string>> list_dir(int dirfd);
// At most 8 runs of chunk numbers in one problem line.
std::string describe_runs(const std::vector<std::uint64_t>& chunks);
// Names the walk never checks as entries: the vault's own files, and at the top its config,
// journal and lost+found.
bool skipped_entry(std::string_view name, bool at_root);
// What fsck reads of a regular file: its allocated bytes, at most its size. Holes (unallocated
// ranges) are skipped with SEEK_DATA, so progress follows the data, not the logical size.
std::uint64_t bytes_to_check(const struct stat& st);
// What open_beneath found, for a message that starts with the item: "is a FIFO, not what the
// vault keeps there", "is or passes through a symbolic link (...)", "cannot be opened (EACCES...)".
std::string describe(const OpenResult& r);
std::string sha256_base64url(std::string_view s);
// A name for the lost+found index: control characters (a newline or tab in a planted file name)
// are written as \xNN, so every move stays one line of four tab-separated fields.
std::string index_field(std::string_view s);
// write(2) until all of s is out (the index is opened O_APPEND, where pwrite would ignore its offset).
bool append_all(int fd, std::string_view s);
// rename(2) that never replaces what is at the target: RENAME_NOREPLACE where the filesystem has
// it, else a look first (what a race could then replace is an entry of lost+found, inside the
// vault, never anything outside it).
int rename_noreplace(int from_dir, const std::string& from, int to_dir, const std::string& to);

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
  // The lengths of the parent's paths (Checker::crel_, plain_), to cut them back to on the way up.
  std::size_t crel_up = 0, plain_up = 1;
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

// An entry of the directory at the top of the walk, for messages.
struct Where {
  const std::string& dir;        // the directory's CIPHERDIR-relative path ("" for CIPHERDIR)
  const std::string* plain_dir;  // its plaintext path ("/"), null when a name on the way does not decrypt
  const std::string& name;
  const std::optional<std::string>& pname;  // its plaintext name, when it decrypts
  std::string cipher() const { return join(dir, name); }
  std::optional<std::string> plain() const {
    if (!plain_dir || !pname) return std::nullopt;
    return plain_join(*plain_dir, *pname);
  }
};

class Checker {
 public:
  Checker(const Vault& vault, ChunkEngine& engine, const FsckOptions& options)
      : vault_(vault), engine_(engine), options_(options), names_(vault.keys().names_key()) {}
  FsckReport run();
 private:
  // The crash journal's valid records: pre-images of rewrites a killed daemon may have torn.
  // Anything but a regular file there is damage to report, never something to open.
  void load_journal();
  // gpucryptfs.lost+found and its index must be a real directory and a regular file of their own
  // (no link, no FIFO, no second hard link): otherwise --repair would move files or write lines
  // wherever they lead. Anything else is reported, and --repair then moves nothing.
  void check_lost_found_shape();
  void refuse_repair(const std::string& cpath, const std::string& why);
  // The pre-pass: how much there is to read, for the progress bar. Iterative, like the check.
  void count();
  void report_progress(bool force = false);
  // Adds a problem; returns its index in the report.
  std::size_t problem(std::string cipher_path, std::optional<std::string> plain_path, std::string what, bool unreadable);
  // Depth first, without recursion: `frames` is the path from CIPHERDIR to the directory being
  // read, each level holding its own listing, so memory grows with the depth and the widest
  // listing on the way, never with the whole tree.
  void walk(DirChain& chain);
  // The paths of the directory at the top of the walk, for messages (see crel_ and plain_).
  const std::string& dir_crel() const { return crel_; }
  const std::string* plain_dir(const std::vector<Frame>& frames) const {
    return frames.back().plain_known ? &plain_ : nullptr;
  }
  std::optional<std::string> dir_plain(const std::vector<Frame>& frames) const {
    if (!frames.back().plain_known) return std::nullopt;
    return plain_;
  }
  // Adds the directory `name` (plaintext *pname, when it decrypts) beneath the top to the paths,
  // and takes it off again: each step costs the name's length, never the whole path's.
  void push_path(Frame& child, const std::string& name, const std::optional<std::string>& pname);
  void pop_path(const Frame& f);
  // The walk just descended into the directory of frames.back(): read its IV and its listing.
  void enter_dir(DirChain& chain, std::vector<Frame>& frames);
  // The walk cannot get back to the directory at the top (its descriptor was closed and ".." of
  // the level below is no longer it): what it still holds is neither checked nor moved, since no
  // path would be sure to lead to the same place.
  void lost_dir(const std::vector<Frame>& frames);
  void finish_dir(int dirfd, Frame& f, const std::vector<Frame>& frames);
  static std::string in_dir(const std::optional<std::string>& plain);
  // For a name that does not decrypt: what to do when it is a sync client's conflict copy of a
  // name of the directory f (fs/conflict_names.h), else "".
  std::string conflict_hint(int dirfd, const std::string& name, const Frame& f) const;
  // One entry of the directory at the top of the walk.
  void check_name(DirChain& chain, std::vector<Frame>& frames, const std::string& name);
  // A long name: its .name file, read beneath the directory (a regular file of at most a few KiB,
  // nothing else is opened), must hash to the entry, be too long for an entry of its own, and
  // decrypt. nullopt with *why saying which of these fails.
  std::optional<std::string> long_name(int dirfd, const std::string& entry, const DirIv& iv, std::string* why);
  bool read_iv(int dirfd, const std::vector<Frame>& frames, DirIv* iv);
  // Only when --repair runs, can use lost+found, and nothing above the item is moved already.
  bool schedule_move(int dirfd, Frame& f, const std::string& name, std::size_t problem_index, bool with_name_file,
                     const struct stat* seen = nullptr);
  void check_entry(DirChain& chain, std::vector<Frame>& frames, const std::string& name,
                   const std::optional<std::string>& pname, std::optional<std::size_t> bad_name, bool with_name_file);
  void check_xattrs(int fd, const Where& where);
  // Chunks of a file that fail (or a size that is impossible) which the crash journal can put
  // back. With --repair (and the journal's lock) they are restored and the file is checked
  // again: returns true, all is reported. Otherwise returns false and sets *note to append to
  // the problem ("" when the journal cannot help).
  bool try_journal(int fd, const FileId& id, int dirfd, const Where& where, std::string* note);
  // The first chunk at or after `first` that may hold data: chunks wholly inside a hole of a
  // sparse file read as zeros, which the format calls holes, so they are counted without being
  // read (a 1 TiB sparse file is checked in one step). nchunks when only holes follow.
  std::uint64_t next_data_chunk(int fd, std::uint64_t first, std::uint64_t nchunks) const;
  void check_content(int fd, std::uint64_t size, int dirfd, const Where& where, bool after_restore = false);
  // --repair, at the first move: CIPHERDIR/gpucryptfs.lost+found as a real directory beneath
  // CIPHERDIR's descriptor, and its index opened beneath that for appending, as a regular file
  // with no other hard link. When either is anything else, nothing is moved at all.
  bool open_lost_found();
  // Moves one unreadable item from the directory descriptor the check read it through into
  // lost+found: renameat between two held descriptors, so no path is resolved again, and only
  // when the name still holds the inode the check saw.
  void move_aside(int dirfd, const PendingMove& m);
  const Vault& vault_;
  ChunkEngine& engine_;
  const FsckOptions& options_;
  NameCipher names_;
  FsckReport report_;
  FsckProgress progress_;
  std::uint64_t calls_ = 0;
  int root_fd_ = -1;  // CIPHERDIR, held by the walk's DirChain for the whole run
  // The CIPHERDIR-relative ("" for CIPHERDIR) and plaintext ("/") paths of the directory at the
  // top of the walk, valid (plain_ only while frames.back().plain_known) for messages. One string
  // each, extended on the way down and cut back on the way up: rebuilding them from the frames
  // for every message made a deep tree of damaged directories cost time cubic in its depth.
  std::string crel_;
  std::string plain_ = "/";
  std::set<std::pair<dev_t, ino_t>> seen_;
  std::vector<JournalRecord> journal_;
  std::map<FileId, std::vector<const JournalRecord*>> journal_by_id_;
  UniqueFd journal_lock_;  // held while --repair restores from the journal
  UniqueFd lost_found_, index_;  // --repair, from the first move on
};

}  // namespace gcfs::fsck
