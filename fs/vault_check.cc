#include "fs/vault_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <map>
#include <set>
#include <utility>

#include "fs/chunk_journal.h"
#include "fs/content_file.h"
#include "fs/dir_iv.h"
#include "fs/file_header.h"
#include "fs/journal_recovery.h"
#include "fs/log.h"

namespace gcfs {
namespace {

// Ciphertext read per engine batch: large enough to keep every engine thread busy.
constexpr std::uint64_t kBatchBytes = 8u << 20;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }

 private:
  int fd_;
};

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

bool all_zero(const std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

// "3", "3..7": runs of chunk numbers for a message.
std::string describe_runs(const std::vector<std::uint64_t>& chunks, std::size_t max_runs = 8) {
  std::string out;
  std::size_t runs = 0;
  for (std::size_t i = 0; i < chunks.size();) {
    std::size_t j = i;
    while (j + 1 < chunks.size() && chunks[j + 1] == chunks[j] + 1) ++j;
    if (runs == max_runs) {
      out += ", ...";
      break;
    }
    if (!out.empty()) out += ", ";
    out += std::to_string(chunks[i]);
    if (j > i) out += ".." + std::to_string(chunks[j]);
    ++runs;
    i = j + 1;
  }
  return out;
}

bool is_leftover_temp(std::string_view name) {
  // Atomic writes of the config and of directory IVs go through NAME.tmp and a rename; a crash
  // between the two leaves the temporary behind, which is harmless.
  return name == std::string(kConfigFileName) + ".tmp" || name == std::string(kDirIvFileName) + ".tmp";
}

class Checker {
 public:
  Checker(const Vault& vault, ChunkEngine& engine, const FsckOptions& options)
      : vault_(vault), engine_(engine), options_(options), names_(vault.keys().names_key()) {
    // The crash journal's valid records: pre-images of rewrites a killed daemon may have torn.
    journal_ = ChunkJournal::read_records(vault.journal_path(), vault.config().chunk_size, vault.keys());
    for (const auto& r : journal_) journal_by_id_[r.file_id].push_back(&r);
    if (options_.repair && !journal_.empty()) {
      // Restoring takes the journal's lock, as a mount does: never while a daemon writes.
      journal_lock_ = Fd(::open(vault.journal_path().c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
      if (journal_lock_ && ::flock(journal_lock_.get(), LOCK_EX | LOCK_NB) != 0) journal_lock_ = Fd();
    }
  }

  FsckReport run() {
    Fd root(::open(vault_.cipherdir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root) throw UserError("cannot open CIPHERDIR " + vault_.cipherdir() + ": " + std::strerror(errno));
    count(root.get(), true);
    report_progress(true);
    check_dir(root.get(), "", std::string("/"));
    progress_.done_bytes = progress_.total_bytes;  // long-name files and the like are counted, not read
    progress_.done_entries = progress_.total_entries;
    report_progress(true);
    if (options_.repair) repair();
    if (journal_lock_ && ChunkJournal::invalidate_records(vault_.journal_path(), vault_.config().chunk_size, journal_) == 0)
      journal_.clear();  // dealt with: what was restorable is restored
    return std::move(report_);
  }

 private:
  // The pre-pass: how much there is to read, for the progress bar.
  void count(int dirfd, bool is_root) {
    auto names = list_dir(dirfd);
    if (!names) return;
    for (const auto& n : *names) {
      if ((is_root && (n == kLostFoundDirName || n == kConfigFileName || n == kJournalFileName)) || n == kDirIvFileName ||
          is_leftover_temp(n))
        continue;
      struct stat st {};
      if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      ++progress_.total_entries;
      if (S_ISREG(st.st_mode)) progress_.total_bytes += static_cast<std::uint64_t>(st.st_size);
      if (S_ISDIR(st.st_mode)) {
        Fd sub(::openat(dirfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub) count(sub.get(), false);
      }
    }
  }

  void report_progress(bool force = false) {
    if (!options_.progress) return;
    if (!force && ++calls_ % 16 != 0) return;
    options_.progress(progress_);
  }

  FsckProblem& problem(std::string cipher_path, std::optional<std::string> plain_path, std::string what,
                       bool unreadable) {
    FsckProblem p;
    p.cipher_path = std::move(cipher_path);
    p.plain_path = plain_path.value_or("");
    p.what = std::move(what);
    p.unreadable = unreadable;
    report_.problems.push_back(std::move(p));
    return report_.problems.back();
  }

  // crel: the directory's ciphertext path relative to CIPHERDIR ("" for the root); plain: its
  // plaintext path, nullopt when a name on the way does not decrypt.
  void check_dir(int dirfd, const std::string& crel, const std::optional<std::string>& plain) {
    ++report_.directories;
    DirIv iv{};
    const bool have_iv = read_iv(dirfd, crel, plain, &iv);
    auto listed = list_dir(dirfd);
    if (!listed) {
      problem(crel.empty() ? "." : crel, plain, std::string("cannot list the directory: ") + std::strerror(errno), false);
      return;
    }
    const std::set<std::string> present(listed->begin(), listed->end());
    std::vector<std::size_t> bad_names;  // indexes into report_.problems
    std::size_t named = 0;
    for (const std::string& name : *listed) {
      const std::string cpath = join(crel, name);
      if (crel.empty() && (name == kConfigFileName || name == kLostFoundDirName || name == kJournalFileName)) continue;
      if (name == kDirIvFileName || is_leftover_temp(name)) continue;
      ++progress_.done_entries;
      report_progress();

      const bool name_file = name.starts_with(kLongNamePrefix) && name.ends_with(kLongNameSuffix);
      if (name_file) {
        const std::string entry = name.substr(0, name.size() - kLongNameSuffix.size());
        if (!present.count(entry))
          problem(cpath, std::nullopt,
                  "long-name file without its entry " + entry + " (left over, or its entry was removed)" +
                      in_dir(plain),
                  true);
        continue;
      }

      std::optional<std::string> pname;
      bool bad_name = false;
      std::string why;
      if (!have_iv) {
        // Reported once for the directory; entries have no plaintext name but are still checked.
      } else if (is_long_name_entry(name)) {
        pname = vault_.names().to_plain(dirfd, name, iv);
        if (!pname) {
          bad_name = true;
          auto encoded = NameMapping::read_name_file(dirfd, name);
          if (!encoded) why = "long name whose " + name + std::string(kLongNameSuffix) + " file is missing or unreadable";
          else if (encoded->size() <= kMaxNameBytes)
            why = "long-name entry holding a name short enough for its own entry (a planted second spelling)";
          else if (names_.decrypt(*encoded, iv)) why = "long name whose .name file does not match its hash (swapped or edited)";
          else why = "long name that does not decrypt (damaged, from another vault, or moved from another directory)";
        }
      } else if (is_internal_entry(name)) {
        problem(cpath, std::nullopt, "not a file gpucryptfs writes (a name with a dot that is none of its own)" + in_dir(plain),
                true);
        continue;
      } else {
        pname = names_.decrypt(name, iv);
        if (!pname) {
          bad_name = true;
          why = "name does not decrypt (damaged, from another vault, or moved from another directory)";
        }
      }
      std::optional<std::string> child_plain;
      if (plain && pname) child_plain = plain_join(*plain, *pname);
      ++named;
      if (bad_name) {
        bad_names.push_back(report_.problems.size());
        problem(cpath, std::nullopt, why + in_dir(plain), true);
        if (is_long_name_entry(name) && present.count(name + std::string(kLongNameSuffix)))
          long_siblings_.insert(cpath);
      }
      // An item whose name does not decrypt is reported (and moved aside) as a whole; only a
      // directory's contents are still worth checking one by one.
      check_entry(dirfd, name, cpath, child_plain, /*contents=*/!bad_name);
    }
    if (bad_names.size() >= 2 && bad_names.size() == named)
      for (std::size_t i : bad_names)
        report_.problems[i].what += "; no name in this directory decrypts, so its " + std::string(kDirIvFileName) +
                                    " is probably damaged or replaced";
  }

  static std::string in_dir(const std::optional<std::string>& plain) {
    return plain ? " in plaintext directory " + *plain : "";
  }

  bool read_iv(int dirfd, const std::string& crel, const std::optional<std::string>& plain, DirIv* iv) {
    Fd fd(::openat(dirfd, kDirIvFileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    const std::string cpath = join(crel, kDirIvFileName);
    if (!fd) {
      problem(cpath, plain,
              std::string("directory IV missing or unreadable (") + std::strerror(errno) +
                  "): no name in this directory can be decrypted",
              false);
      return false;
    }
    std::uint8_t buf[kDirIvBytes + 1];
    ssize_t n = pread_full(fd.get(), buf, sizeof buf, 0);
    if (n != static_cast<ssize_t>(kDirIvBytes)) {
      problem(cpath, plain,
              "directory IV has " + std::to_string(n < 0 ? 0 : n) + " bytes instead of 16: no name in this directory can be decrypted",
              false);
      return false;
    }
    std::copy(buf, buf + kDirIvBytes, iv->begin());
    return true;
  }

  void check_entry(int dirfd, const std::string& name, const std::string& cpath, const std::optional<std::string>& plain,
                   bool contents) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      problem(cpath, plain, std::string("cannot stat: ") + std::strerror(errno), false);
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      Fd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) {
        problem(cpath, plain, std::string("cannot open the directory: ") + std::strerror(errno), false);
        return;
      }
      if (contents) check_xattrs(sub.get(), cpath, plain);
      check_dir(sub.get(), cpath, plain);
    } else if (!contents) {
      if (S_ISREG(st.st_mode)) progress_.done_bytes += static_cast<std::uint64_t>(st.st_size);
    } else if (S_ISREG(st.st_mode)) {
      ++report_.files;
      Fd f(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!f) {
        problem(cpath, plain, std::string("cannot open: ") + std::strerror(errno), false);
        return;
      }
      check_xattrs(f.get(), cpath, plain);
      // Hard links share one ciphertext: read it once.
      if (st.st_nlink > 1 && !seen_.insert({st.st_dev, st.st_ino}).second) {
        progress_.done_bytes += static_cast<std::uint64_t>(st.st_size);
        return;
      }
      check_content(f.get(), static_cast<std::uint64_t>(st.st_size), cpath, plain);
    } else if (S_ISLNK(st.st_mode)) {
      ++report_.symlinks;
      std::string target(PATH_MAX + 1, '\0');
      ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
      if (n < 0) {
        problem(cpath, plain, std::string("cannot read the symlink: ") + std::strerror(errno), false);
        return;
      }
      target.resize(static_cast<std::size_t>(n));
      if (!vault_.names().decrypt_symlink(target))
        problem(cpath, plain, "symlink target does not decrypt (damaged or not from this vault)", true);
    } else {
      ++report_.others;  // fifos, sockets, device nodes: nothing encrypted but the name
    }
  }

  void check_xattrs(int fd, const std::string& cpath, const std::optional<std::string>& plain) {
    ssize_t len = ::flistxattr(fd, nullptr, 0);
    if (len <= 0) return;  // none, or a filesystem without xattrs
    std::string list(static_cast<std::size_t>(len), '\0');
    len = ::flistxattr(fd, list.data(), list.size());
    if (len <= 0) return;
    list.resize(static_cast<std::size_t>(len));
    for (std::size_t pos = 0; pos < list.size();) {
      const std::string stored(list.c_str() + pos);
      pos += stored.size() + 1;
      if (!stored.starts_with(kXattrPrefix)) continue;
      ++report_.xattrs;
      auto pname = vault_.names().decrypt_xattr_name(stored);
      if (!pname) {
        problem(cpath, plain, "extended attribute " + stored + ": its name does not decrypt", false);
        continue;
      }
      ssize_t vlen = ::fgetxattr(fd, stored.c_str(), nullptr, 0);
      std::vector<std::uint8_t> value(vlen > 0 ? static_cast<std::size_t>(vlen) : 0);
      if (vlen >= 0) vlen = ::fgetxattr(fd, stored.c_str(), value.data(), value.size());
      if (vlen < 0) {
        problem(cpath, plain, "extended attribute " + *pname + ": cannot read it: " + std::strerror(errno), false);
        continue;
      }
      value.resize(static_cast<std::size_t>(vlen));
      if (!vault_.names().decrypt_xattr_value(stored, value))
        problem(cpath, plain, "extended attribute " + *pname + ": its value does not decrypt (damaged or moved)", false);
    }
  }

  // Chunks of a file that fail (or a size that is impossible) which the crash journal can put
  // back. With --repair (and the journal's lock) they are restored and the file is checked
  // again: returns true, all is reported. Otherwise returns false and sets *note to append to
  // the problem ("" when the journal cannot help).
  bool try_journal(int fd, const FileId& id, const std::string& cpath, const std::optional<std::string>& plain,
                   std::string* note) {
    auto it = journal_by_id_.find(id);
    if (it == journal_by_id_.end()) return false;
    const RestorePlan plan = restore_from_records(fd, id, it->second, vault_.layout(), vault_.keys(), engine_, false);
    if (plan.chunks.empty()) return false;
    if (journal_lock_) {
      Fd rw(::open((vault_.cipherdir() + "/" + cpath).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
      if (rw) {
        const RestorePlan done =
            restore_from_records(rw.get(), id, it->second, vault_.layout(), vault_.keys(), engine_, true);
        for (std::uint64_t k : done.chunks) {
          report_.restored.push_back("restored chunk " + std::to_string(k) + " of " + cpath + " from the crash journal");
          log::warning("restored chunk " + std::to_string(k) + " of " + vault_.cipherdir() + "/" + cpath +
                       " from the crash journal");
        }
        struct stat st {};
        if (done.error == 0 && ::fstat(rw.get(), &st) == 0) {
          check_content(rw.get(), static_cast<std::uint64_t>(st.st_size), cpath, plain, /*after_restore=*/true);
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

  void check_content(int fd, std::uint64_t size, const std::string& cpath, const std::optional<std::string>& plain,
                     bool after_restore = false) {
    const ChunkLayout& layout = vault_.layout();
    if (size == 0) return;  // an empty plaintext file
    // A file checked again after --repair restored chunks was counted the first time.
    const std::uint64_t counts = after_restore ? 0 : 1;
    if (size < kFileHeaderBytes) {
      progress_.done_bytes += size;
      problem(cpath, plain, "ciphertext is " + std::to_string(size) + " bytes, shorter than a file header (truncated)", true);
      return;
    }
    std::array<std::uint8_t, kFileHeaderBytes> raw{};
    if (pread_full(fd, raw.data(), raw.size(), 0) != static_cast<ssize_t>(raw.size())) {
      problem(cpath, plain, std::string("cannot read the file header: ") + std::strerror(errno), false);
      return;
    }
    auto header = FileHeader::decode(raw);
    if (!header) {
      progress_.done_bytes += size;
      problem(cpath, plain, "file header is damaged (not a gpucryptfs version 1 header): nothing in the file can be read",
              true);
      return;
    }
    auto plain_size = layout.plain_size(size);
    bool size_bad = false;
    std::uint64_t checkable = 0;
    if (plain_size) {
      checkable = *plain_size;
    } else {
      size_bad = true;  // a torn last chunk: check the whole chunks before it
      checkable = (size - kFileHeaderBytes) / layout.disk_chunk_size() * layout.chunk_size();
    }
    const ChunkKey key = vault_.keys().content_key(header->id);
    const std::uint64_t C = layout.chunk_size(), D = layout.disk_chunk_size();
    const std::uint64_t nchunks = layout.chunk_count(checkable);
    const std::uint64_t per_batch = std::max<std::uint64_t>(1, kBatchBytes / D);
    std::vector<std::uint64_t> bad;
    std::vector<std::uint8_t> ct, pt;
    std::uint64_t opened = 0, accounted = 0;
    for (std::uint64_t first = 0; first < nchunks; first += per_batch) {
      const std::uint64_t last = std::min(nchunks, first + per_batch) - 1;
      const std::uint64_t begin = layout.disk_offset(first);
      const std::uint64_t end = layout.disk_offset(last) + layout.chunk_plain_len(last, checkable) + kChunkOverhead;
      ct.resize(end - begin);
      pt.resize((last - first + 1) * C);
      ssize_t n = pread_full(fd, ct.data(), ct.size(), begin);
      if (n != static_cast<ssize_t>(ct.size())) {
        problem(cpath, plain, std::string("cannot read the ciphertext: ") + (n < 0 ? std::strerror(static_cast<int>(-n)) : "short read"),
                false);
        return;
      }
      std::vector<ChunkOp> ops;
      std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads(last - first + 1);
      std::vector<std::uint64_t> which;
      for (std::uint64_t k = first; k <= last; ++k) {
        const std::uint64_t len = layout.chunk_plain_len(k, checkable);
        const std::uint8_t* src = ct.data() + (k - first) * D;
        report_.chunks += counts;
        if (all_zero(src, len + kChunkOverhead)) {
          report_.holes += counts;
          continue;
        }
        aads[k - first] = chunk_aad(header->id, k);
        ChunkOp op;
        op.key = &key;
        std::copy(src, src + kChunkNonceOnDisk, op.nonce.begin());
        op.aad = aads[k - first].data();
        op.aad_len = kChunkAadBytes;
        op.in = src + kChunkNonceOnDisk;
        op.out = pt.data() + (k - first) * C;
        op.len = len;
        std::copy(src + kChunkNonceOnDisk + len, src + kChunkNonceOnDisk + len + kChunkTagOnDisk, op.tag.begin());
        ops.push_back(op);
        which.push_back(k);
      }
      if (!ops.empty()) engine_.open(ops);
      for (std::size_t i = 0; i < ops.size(); ++i)
        if (!ops[i].ok) bad.push_back(which[i]);
      opened += ops.size();
      secure_wipe(pt.data(), pt.size());  // plaintext is not kept past the check
      progress_.done_bytes += ct.size() * counts;
      accounted += ct.size();
      report_progress();
    }
    progress_.done_bytes += (size - accounted) * counts;  // the header and a torn tail
    report_.bytes += size * counts;
    std::string journal_note;
    if ((size_bad || !bad.empty()) && !after_restore && try_journal(fd, header->id, cpath, plain, &journal_note)) return;
    const bool recoverable = !journal_note.empty();
    if (size_bad) {
      const std::uint64_t tail = (size - kFileHeaderBytes) % D;
      // The mount reads such a file as its whole chunks (an append cut short between pages
      // leaves exactly this), so it is not unreadable unless its chunks are.
      problem(cpath, plain,
              "ciphertext size " + std::to_string(size) + " ends in an incomplete chunk of " + std::to_string(tail) +
                  " bytes (at most its nonce and tag): a write cut short, or a cut; the mount reads the " +
                  std::to_string(nchunks) + " whole chunks before it and drops the fragment at the next write" +
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
    problem(cpath, plain, what + journal_note, all_bad && !recoverable);
  }

  // --repair: moves every unreadable item into CIPHERDIR/gpucryptfs.lost+found, parents before
  // children (a moved directory takes its contents along), and writes an index of what came from
  // where. Never deletes anything.
  void repair() {
    std::vector<FsckProblem*> todo;
    for (auto& p : report_.problems)
      if (p.unreadable) todo.push_back(&p);
    if (todo.empty()) return;
    std::sort(todo.begin(), todo.end(), [](const FsckProblem* a, const FsckProblem* b) {
      return a->cipher_path.size() < b->cipher_path.size();
    });
    const std::string root = vault_.cipherdir();
    const std::string lf = root + "/" + kLostFoundDirName;
    if (::mkdir(lf.c_str(), 0700) != 0 && errno != EEXIST)
      throw UserError("cannot create " + lf + ": " + std::strerror(errno) + "; nothing was moved");
    FILE* index = std::fopen((lf + "/" + kLostFoundIndexName).c_str(), "a");
    if (!index) throw UserError("cannot write " + lf + "/" + kLostFoundIndexName + ": " + std::strerror(errno));
    std::vector<std::string> moved;
    for (FsckProblem* p : todo) {
      bool under_moved = false;
      for (const auto& m : moved)
        if (p->cipher_path == m || p->cipher_path.starts_with(m + "/")) under_moved = true;
      if (under_moved) continue;
      const std::string base = p->cipher_path.substr(p->cipher_path.rfind('/') + 1);
      std::string target;
      for (unsigned n = 1;; ++n) {
        target = std::to_string(n) + "-" + base.substr(0, 200);
        struct stat st {};
        if (::lstat((lf + "/" + target).c_str(), &st) != 0 && errno == ENOENT) break;
      }
      if (::rename((root + "/" + p->cipher_path).c_str(), (lf + "/" + target).c_str()) != 0) {
        p->what += std::string("; could not move it aside: ") + std::strerror(errno);
        continue;
      }
      if (long_siblings_.count(p->cipher_path)) {
        const std::string suffix(kLongNameSuffix);
        (void)::rename((root + "/" + p->cipher_path + suffix).c_str(), (lf + "/" + target + suffix).c_str());
      }
      p->moved_to = std::string(kLostFoundDirName) + "/" + target;
      moved.push_back(p->cipher_path);
      std::fprintf(index, "%s\tfrom %s\tplaintext %s\t%s\n", target.c_str(), p->cipher_path.c_str(),
                   p->plain_path.empty() ? "(unknown)" : p->plain_path.c_str(), p->what.c_str());
    }
    std::fclose(index);
  }

  const Vault& vault_;
  ChunkEngine& engine_;
  const FsckOptions& options_;
  NameCipher names_;
  FsckReport report_;
  FsckProgress progress_;
  std::uint64_t calls_ = 0;
  std::set<std::pair<dev_t, ino_t>> seen_;
  std::set<std::string> long_siblings_;
  std::vector<JournalRecord> journal_;
  std::map<FileId, std::vector<const JournalRecord*>> journal_by_id_;
  Fd journal_lock_;  // held while --repair restores from the journal
};

}  // namespace

FsckReport check_vault(const Vault& vault, ChunkEngine& engine, const FsckOptions& options) {
  return Checker(vault, engine, options).run();
}

}  // namespace gcfs
