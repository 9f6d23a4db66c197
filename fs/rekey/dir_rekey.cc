#include "fs/rekey/dir_rekey.h"

#include <fcntl.h>

#include <memory>

#include "fs/rekey/serial_jobs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "crypto/errors.h"
#include "crypto/random.h"
#include "fs/dir_iv.h"
#include "fs/log.h"
#include "fs/name_mapping.h"
#include "fs/safe_open.h"

namespace gcfs {
namespace {

constexpr std::string_view kTempPrefix = "gcfs.rekey.";
constexpr std::size_t kBatchFiles = 256;
constexpr std::uint64_t kBatchBytes = std::uint64_t{256} << 20;

std::atomic<long> g_steps_left{-2};  // -2: not read yet; -1: no hook

[[noreturn]] void fail(const std::string& where, const std::string& what, int err) {
  throw UserError("rekey: " + where + ": " + what + ": " + std::strerror(err) +
                  " (nothing is lost: run `gpucryptfs rekey` again once the cause is fixed)");
}

std::string join(const std::vector<std::string>& path, const std::string& name) {
  std::string s;
  for (const auto& p : path) s += p + "/";
  return s + name;
}

std::vector<std::string> list_dir(int dirfd) {
  const int dup = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return {};
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return {};
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

UniqueFd open_dir(int dirfd, const std::string& name) {
  return UniqueFd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

bool exists(int dirfd, const std::string& name, struct stat* st = nullptr) {
  struct stat s {};
  const bool ok = ::fstatat(dirfd, name.c_str(), &s, AT_SYMLINK_NOFOLLOW) == 0;
  if (ok && st) *st = s;
  return ok;
}

std::string temp_name() {
  std::uint8_t r[8];
  random_bytes(r);
  static const char* hex = "0123456789abcdef";
  std::string s(kTempPrefix);
  for (std::uint8_t b : r) s += hex[b >> 4], s += hex[b & 15];
  return s + ".tmp";
}

// Entries the walk looks at: names and long names; the rest with a dot is the vault's own.
bool is_named_entry(const std::string& e) { return !is_internal_entry(e) || is_long_name_entry(e); }

struct Member {  // one name of a hard-linked inode under the old key
  std::vector<std::string> dir;  // ciphertext path of its directory from CIPHERDIR
  std::string entry;             // its old entry
  std::string plain;
  DirIv iv;
};

// One regular file or symlink of a directory's batch: copied into `temp`, then renamed.
struct Pending {
  std::string old_entry;
  DiskName old_name, new_name;
  struct stat st {};
  std::string temp;
  std::string old_link;  // symlinks: the old link, for its long-target file
};

// What one walking thread owns: its counts and its name thread. Directories are walked by several
// threads at once (DirRekeyHooks::walkers); each directory's entries stay with one of them.
struct Walk {
  DirRekeyStats stats;
  SerialJobs names;  // its batches' renames and removals, in order (serial_jobs.h)
};

void add_stats(DirRekeyStats& to, const DirRekeyStats& s) {
  to.files += s.files, to.directories += s.directories, to.symlinks += s.symlinks, to.others += s.others;
  to.hard_link_groups += s.hard_link_groups, to.bytes += s.bytes, to.twins_removed += s.twins_removed;
  to.foreign += s.foreign;
}

}  // namespace

void rekey_step() {
  long left = g_steps_left.load();
  if (left == -2) {
    const char* v = std::getenv("GPUCRYPTFS_REKEY_TEST_STOP_AFTER");
    long n = v ? std::strtol(v, nullptr, 10) : -1;
    g_steps_left = left = n > 0 ? n : -1;
  }
  if (left < 0) return;
  if (g_steps_left.fetch_sub(1) <= 1) ::kill(::getpid(), SIGKILL);
}

struct DirRekey::Impl {
  Impl(int root_fd, const RekeyPair& keys, DirRekeyHooks h) : root(root_fd), k(keys), hooks(std::move(h)) {}
  int root;
  RekeyPair k;
  DirRekeyHooks hooks;
  DirRekeyStats stats;  // the walks' counts, added up as each ends (under stats_mu)
  std::mutex stats_mu;
  std::atomic<int> spare_walkers{0};  // threads that may still be started for a subdirectory
  // Found by scan() and re-keyed before the walk, while no directory has moved (a group's names
  // span directories that different walkers may hold); read-only during the walk.
  std::map<std::pair<dev_t, ino_t>, std::vector<Member>> groups;

  const NameMapping& oldn() const { return k.old_v.names(); }
  const NameMapping& newn() const { return k.new_v.names(); }

  DirIv read_iv(int dirfd, const std::vector<std::string>& path) {
    DirIv iv;
    const std::string where = path.empty() ? "." : join(path, "");
    if (const int rc = k.old_v.dir_ivs().read(dirfd, &iv, FileLabel(where)); rc < 0) fail(where, "cannot read its directory IV", -rc);
    return iv;
  }

  // ---- the first pass ----
  void scan_dir(int dirfd, std::vector<std::string>& path, RekeyTotals& t) {
    const DirIv iv = read_iv(dirfd, path);
    for (const std::string& e : list_dir(dirfd)) {
      if (!is_named_entry(e)) continue;
      struct stat st {};
      if (!exists(dirfd, e, &st)) continue;
      if (S_ISDIR(st.st_mode)) {
        UniqueFd sub = open_dir(dirfd, e);
        if (!sub) fail(join(path, e), "cannot open the directory", errno);
        path.push_back(e);
        scan_dir(sub.get(), path, t);
        path.pop_back();
      } else if (S_ISREG(st.st_mode)) {
        // The old key first: before a re-key every name is under it, and a name opens under one
        // key only (AES-SIV authenticates), so a done entry costs one more try, a new one none.
        const auto plain = oldn().to_plain(dirfd, e, iv);
        if (!plain) continue;
        t.bytes += static_cast<std::uint64_t>(st.st_size);
        ++t.files;
        if (st.st_nlink > 1) groups[{st.st_dev, st.st_ino}].push_back({path, e, *plain, iv});
      }
    }
  }

  // ---- the walk ----
  void rekey_dir(Walk& w, int dirfd, std::vector<std::string>& path) {
    struct stat dst {};
    ::fstat(dirfd, &dst);
    const DirIv iv = read_iv(dirfd, path);
    std::vector<std::string> names = list_dir(dirfd);
    for (const std::string& e : names)
      if (std::string_view(e).starts_with(kTempPrefix)) ::unlinkat(dirfd, e.c_str(), 0);  // a killed re-key's
    std::vector<Pending> batch, subdirs;
    std::vector<std::string> done_subdirs;  // already under the new key: checked again
    std::uint64_t batch_bytes = 0;
    for (const std::string& e : names) {
      if (!is_named_entry(e)) continue;
      struct stat st {};
      if (!exists(dirfd, e, &st)) continue;  // gone meanwhile (a hard link handled with its group)
      const auto plain = oldn().to_plain(dirfd, e, iv);  // the old key first, as in scan_dir
      if (!plain && newn().to_plain(dirfd, e, iv)) {
        if (S_ISDIR(st.st_mode)) done_subdirs.push_back(e);  // finished already, checked again cheaply
        continue;
      }
      if (!plain) {
        ++w.stats.foreign;
        log::warning("rekey: " + join(path, e) + " is under neither key (not the vault's, or damaged): left as it is");
        continue;
      }
      Pending p;
      p.old_entry = e;
      p.old_name = oldn().to_disk(*plain, iv);
      p.new_name = newn().to_disk(*plain, iv);
      p.st = st;
      if (S_ISDIR(st.st_mode)) {
        subdirs.push_back(std::move(p));
      } else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
        // The listing tells: only a re-key makes names under the new key, and not during this one
        // for this plaintext name.
        if (std::binary_search(names.begin(), names.end(), p.new_name.entry)) {
          remove_old(dirfd, path, p);
          ++w.stats.twins_removed;
          continue;
        }
        batch_bytes += static_cast<std::uint64_t>(st.st_size);
        batch.push_back(std::move(p));
        if (batch.size() >= kBatchFiles || batch_bytes >= kBatchBytes) {
          flush(w, dirfd, path, batch);
          batch.clear();
          batch_bytes = 0;
        }
      } else {
        rename_in_place(dirfd, path, p, true);
        ++w.stats.others;
      }
    }
    flush(w, dirfd, path, batch);
    // The subdirectories' contents (on other threads where some are spare), then, once all are
    // done, their own attributes and names: a directory is renamed after everything in it.
    walk_subdirs(w, dirfd, path, subdirs, done_subdirs);
    for (const Pending& p : subdirs) {
      rename_in_place(dirfd, path, p, false);
      ++w.stats.directories;
    }
    // After the batches' name changes, on the same thread: the leftover long names swept, the
    // directory synced and its times put back.
    auto dir = std::make_shared<UniqueFd>(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
    if (!*dir) fail(join(path, ""), "cannot keep the directory open", errno);
    w.names.post([this, dir, path, dst] {
      sweep(dir->get());
      if (const int rc = sync_directory(dir->get()); rc < 0) fail(join(path, ""), "cannot sync the directory", -rc);
      const struct timespec times[2] = {dst.st_atim, dst.st_mtim};
      ::futimens(dir->get(), times);  // the plaintext directory's times, as before the re-key
    });
  }

  void descend(Walk& w, int dirfd, std::vector<std::string>& path, const std::string& e) {
    UniqueFd sub = open_dir(dirfd, e);
    if (!sub) fail(join(path, e), "cannot open the directory", errno);
    path.push_back(e);
    rekey_dir(w, sub.get(), path);
    path.pop_back();
  }

  // Walks each subdirectory, on a thread of its own while spare walkers last, else on this one;
  // returns once all are done (their name threads drained), rethrowing the first failure.
  void walk_subdirs(Walk& w, int dirfd, std::vector<std::string>& path, const std::vector<Pending>& subdirs,
                    const std::vector<std::string>& done_subdirs) {
    std::vector<std::string> entries = done_subdirs;
    for (const Pending& p : subdirs) entries.push_back(p.old_entry);
    std::vector<std::thread> started;
    std::vector<std::exception_ptr> errors(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i + 1 < entries.size() && spare_walkers.fetch_sub(1) > 0) {
        started.emplace_back([this, dirfd, path, e = entries[i], err = &errors[i]]() mutable {
          Walk own;
          try {
            descend(own, dirfd, path, e);
            own.names.drain();
          } catch (...) {
            *err = std::current_exception();
          }
          {
            std::lock_guard lk(stats_mu);
            add_stats(stats, own.stats);
          }
          ++spare_walkers;
        });
        continue;
      }
      if (i + 1 < entries.size()) ++spare_walkers;  // none was spare: give the count back
      try {
        descend(w, dirfd, path, entries[i]);
      } catch (...) {
        errors[i] = std::current_exception();
        break;
      }
    }
    for (auto& t : started) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  void write_name(int dirfd, const std::vector<std::string>& path, const DiskName& n) {
    if (const int rc = NameMapping::write_name_file(dirfd, n); rc < 0)
      fail(join(path, n.name_file()), "cannot write the long name", -rc);
  }

  // A directory, FIFO, socket or device: attributes re-encrypted in place, then one rename.
  void rename_in_place(int dirfd, const std::vector<std::string>& path, const Pending& p, bool special) {
    const XattrPlace at = XattrPlace::in_dir(dirfd, p.old_entry);
    if (const int rc = rekey_xattrs_in_place(k, at, special, &rekey_step); rc < 0)
      fail(join(path, p.old_entry), "cannot re-encrypt its extended attributes", -rc);
    write_name(dirfd, path, p.new_name);
    if (::renameat(dirfd, p.old_entry.c_str(), dirfd, p.new_name.entry.c_str()) != 0)
      fail(join(path, p.old_entry), "cannot rename it to its new name", errno);
    rekey_step();
    NameMapping::remove_name_file(dirfd, p.old_name);
  }

  void remove_old(int dirfd, const std::vector<std::string>& path, const Pending& p) {
    std::string link;
    if (S_ISLNK(p.st.st_mode)) link = NameMapping::read_link(dirfd, p.old_entry.c_str()).value_or("");
    if (::unlinkat(dirfd, p.old_entry.c_str(), 0) != 0 && errno != ENOENT)
      fail(join(path, p.old_entry), "cannot remove the old name", errno);
    rekey_step();
    NameMapping::remove_name_file(dirfd, p.old_name);
    if (!link.empty()) NameMapping::remove_long_target_if_unused(dirfd, link);
  }

  // Makes p's re-keyed copy as p.temp. Returns 0 or -errno (logged by the caller).
  int make_copy(int dirfd, const std::vector<std::string>& path, Pending& p, CopyTimes* times) {
    p.temp = temp_name();
    if (S_ISLNK(p.st.st_mode)) {
      p.old_link = NameMapping::read_link(dirfd, p.old_entry.c_str()).value_or("");
      std::string damage;
      const auto target = oldn().read_symlink(dirfd, p.old_link, &damage);
      if (!target) return -EIO;
      StoredLink l = newn().store_symlink(*target, false);
      if (::symlinkat(l.link.c_str(), dirfd, p.temp.c_str()) != 0) {
        if (errno != ENAMETOOLONG) return -errno;
        l = newn().store_symlink(*target, true);
        if (const int rc = NameMapping::write_long_target(dirfd, l); rc < 0) return rc;
        if (::symlinkat(l.link.c_str(), dirfd, p.temp.c_str()) != 0) return -errno;
      }
      if (::fchownat(dirfd, p.temp.c_str(), p.st.st_uid, p.st.st_gid, AT_SYMLINK_NOFOLLOW) != 0 && errno != EPERM)
        return -errno;
      if (const int rc = copy_xattrs(k, XattrPlace::in_dir(dirfd, p.old_entry), XattrPlace::in_dir(dirfd, p.temp), true);
          rc < 0)
        return rc;
      const struct timespec t[2] = {p.st.st_atim, p.st.st_mtim};
      ::utimensat(dirfd, p.temp.c_str(), t, AT_SYMLINK_NOFOLLOW);
      return 0;
    }
    OpenResult from = open_beneath(dirfd, p.old_entry, FileType::Regular, O_RDONLY);
    if (!from) return -(from.error ? from.error : EIO);
    // Made with the entry's own permission bits (ciphertext, as readable as the entry it replaces),
    // so that copy_file_attributes rarely needs a chmod.
    UniqueFd to(::openat(dirfd, p.temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, p.st.st_mode & 0777));
    if (!to) return -errno;
    const std::int64_t n = copy_content(k, from.fd.get(), to.get(), join(path, p.old_entry), times, hooks.file_parts);
    if (n < 0) return static_cast<int>(n);
    if (const int rc = copy_xattrs(k, XattrPlace::of_fd(from.fd.get()), XattrPlace::of_fd(to.get()), false); rc < 0)
      return rc;
    return copy_file_attributes(to.get(), p.st);
  }

  // Copies the batch (several files at once), syncs once, renames, syncs the directory, then
  // removes the old names.
  void flush(Walk& w, int dirfd, const std::vector<std::string>& path, std::vector<Pending>& batch) {
    if (batch.empty()) return;
    std::atomic<std::size_t> next{0};
    std::vector<int> errs(batch.size(), 0);
    auto worker = [&] {
      for (std::size_t i; (i = next++) < batch.size();) {
        CopyTimes t;
        errs[i] = make_copy(dirfd, path, batch[i], &t);
        if (hooks.times) hooks.times(t);
        if (hooks.progress && errs[i] == 0 && S_ISREG(batch[i].st.st_mode))
          hooks.progress(static_cast<std::uint64_t>(batch[i].st.st_size), 1);
      }
    };
    const int n = std::max(1, std::min<int>(hooks.threads, static_cast<int>(batch.size())));
    std::vector<std::thread> pool;
    for (int i = 1; i < n; ++i) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (errs[i] != 0) {
        for (const Pending& p : batch) ::unlinkat(dirfd, p.temp.c_str(), 0);
        fail(join(path, batch[i].old_entry), "cannot make its re-keyed copy", -errs[i]);
      }
    // One sync for every copy's data and metadata, before any of them gets its name.
    if (::syncfs(dirfd) != 0) fail(join(path, ""), "cannot sync the copies", errno);
    for (const Pending& p : batch) {
      if (S_ISREG(p.st.st_mode)) ++w.stats.files, w.stats.bytes += static_cast<std::uint64_t>(p.st.st_size);
      else ++w.stats.symlinks;
    }
    // The names change on the name thread, in order, while the walk goes on (serial_jobs.h).
    auto dir = std::make_shared<UniqueFd>(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
    if (!*dir) fail(join(path, ""), "cannot keep the directory open", errno);
    w.names.post([this, dir, path, batch = std::move(batch)] {
      const int d = dir->get();
      for (const Pending& p : batch) {
        write_name(d, path, p.new_name);
        if (::renameat(d, p.temp.c_str(), d, p.new_name.entry.c_str()) != 0)
          fail(join(path, p.old_entry), "cannot rename its copy to its new name", errno);
        rekey_step();
      }
      // The new names are durable before an old one goes.
      if (const int rc = sync_directory(d); rc < 0) fail(join(path, ""), "cannot sync the directory", -rc);
      for (const Pending& p : batch) remove_old(d, path, p);
    });
    batch.clear();
  }

  // All names of one hard-linked inode: one copy, a link per other name, then the old names go.
  void rekey_group(const std::vector<Member>& members, std::pair<dev_t, ino_t> id) {
    ++stats.hard_link_groups;
    std::vector<UniqueFd> dirs;
    std::vector<struct stat> dir_times;  // each directory's times, put back once its links changed
    std::vector<DiskName> news, olds;
    int source = -1;
    for (const Member& m : members) {
      UniqueFd d(::openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      for (const std::string& c : m.dir) {
        d = open_dir(d.get(), c);
        if (!d) fail(join(m.dir, ""), "cannot open the directory of a hard link", errno);
      }
      dir_times.emplace_back();
      ::fstat(d.get(), &dir_times.back());
      news.push_back(newn().to_disk(m.plain, m.iv));
      olds.push_back(oldn().to_disk(m.plain, m.iv));
      struct stat st {};
      if (source < 0 && exists(d.get(), news.back().entry, &st) && S_ISREG(st.st_mode))
        source = static_cast<int>(dirs.size());
      dirs.push_back(std::move(d));
    }
    if (source < 0) {  // no copy yet: make it under the first name
      Pending p;
      p.old_entry = members[0].entry;
      exists(dirs[0].get(), p.old_entry, &p.st);
      CopyTimes t;
      if (const int rc = make_copy(dirs[0].get(), members[0].dir, p, &t); rc < 0) {
        ::unlinkat(dirs[0].get(), p.temp.c_str(), 0);
        fail(join(members[0].dir, p.old_entry), "cannot make its re-keyed copy", -rc);
      }
      if (hooks.times) hooks.times(t);
      UniqueFd tf(::openat(dirs[0].get(), p.temp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!tf || ::fsync(tf.get()) != 0) fail(join(members[0].dir, p.old_entry), "cannot sync its copy", errno);
      write_name(dirs[0].get(), members[0].dir, news[0]);
      if (::renameat(dirs[0].get(), p.temp.c_str(), dirs[0].get(), news[0].entry.c_str()) != 0)
        fail(join(members[0].dir, p.old_entry), "cannot rename its copy", errno);
      rekey_step();
      source = 0;
      stats.bytes += static_cast<std::uint64_t>(p.st.st_size);
      if (hooks.progress) hooks.progress(static_cast<std::uint64_t>(p.st.st_size), 1);
    }
    ++stats.files;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (exists(dirs[i].get(), news[i].entry)) continue;
      write_name(dirs[i].get(), members[i].dir, news[i]);
      if (::linkat(dirs[source].get(), news[source].entry.c_str(), dirs[i].get(), news[i].entry.c_str(), 0) != 0)
        fail(join(members[i].dir, members[i].entry), "cannot link the re-keyed copy", errno);
      rekey_step();
    }
    for (auto& d : dirs)
      if (const int rc = sync_directory(d.get()); rc < 0) fail("a hard link's directory", "cannot sync it", -rc);
    for (std::size_t i = 0; i < members.size(); ++i) {
      struct stat st {};
      if (!exists(dirs[i].get(), members[i].entry, &st) || st.st_dev != id.first || st.st_ino != id.second) continue;
      if (::unlinkat(dirs[i].get(), members[i].entry.c_str(), 0) != 0)
        fail(join(members[i].dir, members[i].entry), "cannot remove the old name", errno);
      rekey_step();
      NameMapping::remove_name_file(dirs[i].get(), olds[i]);
    }
    for (std::size_t i = 0; i < dirs.size(); ++i) {
      const struct timespec times[2] = {dir_times[i].st_atim, dir_times[i].st_mtim};
      ::futimens(dirs[i].get(), times);
    }
  }

  // Leftovers of a killed re-key: .name files without their entry, long-target files that no
  // symlink here holds.
  void sweep(int dirfd) {
    const std::vector<std::string> names = list_dir(dirfd);
    std::set<std::string> present(names.begin(), names.end()), links;
    const bool long_targets = std::any_of(names.begin(), names.end(), [](const std::string& e) { return is_long_target_file(e); });
    for (const std::string& e : names) {
      if (!long_targets) break;  // the symlinks' links are needed only to keep their long-target files
      struct stat st {};
      if (is_named_entry(e) && exists(dirfd, e, &st) && S_ISLNK(st.st_mode))
        if (auto l = NameMapping::read_link(dirfd, e.c_str())) links.insert(*l);
    }
    for (const std::string& e : names) {
      if (e.starts_with(kLongNamePrefix) && e.ends_with(kLongNameSuffix)) {
        if (!present.count(e.substr(0, e.size() - kLongNameSuffix.size()))) ::unlinkat(dirfd, e.c_str(), 0);
      } else if (is_long_target_file(e) && !links.count(e)) {
        ::unlinkat(dirfd, e.c_str(), 0);
      }
    }
  }
};

DirRekey::DirRekey(int root_fd, const RekeyPair& keys, DirRekeyHooks hooks)
    : impl_(new Impl(root_fd, keys, std::move(hooks))) {}
DirRekey::~DirRekey() { delete impl_; }

RekeyTotals DirRekey::scan() {
  RekeyTotals t;
  std::vector<std::string> path;
  impl_->groups.clear();
  impl_->scan_dir(impl_->root, path, t);
  return t;
}

DirRekeyStats DirRekey::run() {
  // Hard-linked files first, one group at a time, while every directory is where scan() saw it.
  // The walk then finds their names under the new key and leaves them.
  for (auto& [id, members] : impl_->groups) impl_->rekey_group(members, id);
  impl_->groups.clear();
  impl_->spare_walkers = std::max(1, impl_->hooks.walkers) - 1;
  Walk w;
  std::vector<std::string> path;
  impl_->rekey_dir(w, impl_->root, path);
  w.names.drain();  // every name changed and synced before the caller writes the new config
  add_stats(impl_->stats, w.stats);
  return impl_->stats;
}

}  // namespace gcfs
