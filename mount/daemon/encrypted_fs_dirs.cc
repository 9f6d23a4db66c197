// EncryptedFs: directory listings. Our own dot-names and entries that do not decrypt are left
// out (the latter logged once each), but for sync clients' conflict copies with --badname, so the plaintext view shows exactly the user's names.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "fs/log.h"
#include "mount/daemon/encrypted_fs.h"
#include "mount/daemon/encrypted_fs_handles.h"
#include "mount/daemon/node_generation.h"

namespace gcfs::mount {
namespace {

EncryptedFs::DirHandle* dir_handle_of(fuse_file_info* fi) { return reinterpret_cast<EncryptedFs::DirHandle*>(fi->fh); }

bool is_dot_or_dotdot(const std::string& n) { return n == "." || n == ".."; }

}  // namespace

int EncryptedFs::read_entries(Inode& dir, DirHandle& h) {
  DirIv iv{};
  int rc = dir_iv(dir, &iv);
  if (rc < 0) return rc;
  PathFd at = path_fd(dir);
  if (!at.ok()) return at.error();
  // Read with getdents64 straight from a descriptor of our own (a listing has its own position):
  // a DIR stream would add an fstat and two fcntl calls to every listing.
  const int fd = ::openat(at.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  h.entries.clear();
  std::size_t hidden = 0;
  std::string example;
  alignas(8) char buf[32768];
  for (;;) {
    const ssize_t n = ::getdents64(fd, buf, sizeof buf);
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return -e;
    }
    if (n == 0) break;
    // Room for this batch at once: growing the vector entry by entry reallocated it (a large
    // block, each time the allocator consolidated what small ones had been freed) several times
    // for every directory listed. No record is shorter than its header and a one-byte name,
    // rounded to 8: that many at most, without a second walk of the batch to count them.
    constexpr std::size_t kMinRecord = (offsetof(dirent64, d_name) + 2 + 7) / 8 * 8;
    h.entries.reserve(h.entries.size() + static_cast<std::size_t>(n) / kMinRecord);
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf + off);
      off += e->d_reclen;
      std::string entry = e->d_name;
      if (is_dot_or_dotdot(entry)) {
        h.entries.push_back({entry, entry, e->d_ino, e->d_type});
        continue;
      }
      // A dot-name is ours unless --badname covers it (a sync client's "<name>.sync-conflict-...").
      const bool dotted = is_internal_entry(entry) && !is_long_name_entry(entry);
      if (dotted && !options_.bad_names.covers(entry)) continue;
      std::string damage;
      auto plain = dotted ? std::nullopt : vault_.names().to_plain(fd, entry, iv, &damage);
      // Patterns are matched only against what does not decrypt: a listing costs the same as before.
      if (!plain && damage.empty() && !options_.bad_names.empty()) {
        plain = shown_bad_name(vault_.names(), fd, entry, iv, options_.bad_names);
        if (plain && first_report_of_hidden(label_of(dir), entry))  // once per name, as the hidden ones
          // The ciphertext path alone: plaintext names never go to the log (docs/SECURITY.md).
          log::info(label_of(dir) + "/" + entry + ": does not decrypt; shown because of --badname (a sync "
                    "client's copy, or a name from elsewhere)");
      }
      if (!plain) {
        // A .name file that is not a small regular file (a FIFO, a link, a huge file) is damage that
        // fsck should hear about: said on its own line, with what was found. Each name once.
        if (!first_report_of_hidden(label_of(dir), entry)) continue;
        if (!damage.empty())
          log::error(label_of(dir) + "/" + entry + std::string(kLongNameSuffix) + ": " + damage +
                     " (damaged long-name file; the entry is hidden from listings)");
        else if (++hidden == 1)
          example = entry;
        continue;
      }
      h.entries.push_back({std::move(*plain), std::move(entry), e->d_ino, e->d_type});
    }
  }
  ::close(fd);
  if (hidden)
    log::warning(label_of(dir) + ": " + std::to_string(hidden) + " entries do not decrypt and are hidden (e.g. " +
                 example + "): not written by this vault, moved in from another directory, or damaged" +
                 (options_.bad_names.empty() ? "; a sync client's conflict copies show with --badname" : ""));
  return 0;
}

bool EncryptedFs::first_report_of_hidden(const std::string& dir_label, const std::string& entry) {
  std::lock_guard lk(hidden_mu_);
  // A bound, not an LRU: past it, names are reported again, once each.
  if (hidden_reported_.size() >= 65536) hidden_reported_.clear();
  return hidden_reported_.insert(dir_label + "/" + entry).second;
}

void EncryptedFs::opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto* h = track(new DirHandle);
  fi->fh = reinterpret_cast<std::uint64_t>(h);
  fi->cache_readdir = 0;
  if (fuse_reply_open(req, fi) != 0) {
    untrack(h);
    delete h;
  }
  (void)ino;
}

void EncryptedFs::readdir(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi, bool plus) {
  DirHandle& h = *dir_handle_of(fi);
  Inode& dir = inode(ino);
  if (off == 0) {
    int rc = read_entries(dir, h);
    if (rc < 0) return (void)fuse_reply_err(req, -rc);
  }
  PathFd at;
  if (plus) {  // attributes of each entry: looked up in the directory
    at = path_fd(dir);
    if (!at.ok()) return (void)fuse_reply_err(req, -at.error());
  }
  // The reply is built in a buffer of the serving thread's own: a listing asks for 32 KiB at a
  // time, and a fresh zeroed vector for each reply cost a large allocation (and the consolidation
  // of the small blocks freed before it) per READDIRPLUS.
  // Kept up to 128 KiB a thread; a larger request (a raised max_pages) gets one for itself.
  thread_local std::vector<char> kept;
  std::unique_ptr<char[]> large;
  char* buf;
  if (size <= 128 * 1024) {
    if (kept.size() < size) kept.resize(size);
    buf = kept.data();
  } else {
    large.reset(new char[size]);
    buf = large.get();
  }
  std::size_t used = 0;
  for (std::size_t i = static_cast<std::size_t>(off); i < h.entries.size(); ++i) {
    const auto& ent = h.entries[i];
    const off_t next = static_cast<off_t>(i + 1);
    std::size_t need;
    if (!plus) {
      struct stat st {};
      st.st_ino = ent.ino;
      st.st_mode = static_cast<mode_t>(ent.type) << 12;
      need = fuse_add_direntry(req, buf + used, size - used, ent.name.c_str(), &st, next);
      if (need > size - used) break;
    } else {
      fuse_entry_param e{};
      bool counted = false;
      if (is_dot_or_dotdot(ent.name)) {
        e.attr.st_ino = ent.ino;
        e.attr.st_mode = static_cast<mode_t>(ent.type) << 12;
      } else {
        int rc = make_entry(dir, at.get(), ent.entry, &e);
        // Gone since the snapshot (rm -r at work): skip it rather than fail the listing. Other
        // errors: list the name without attributes; a lookup of it then reports the error.
        if (rc == -ENOENT) continue;
        if (rc < 0) {
          e = fuse_entry_param{};
          e.attr.st_ino = ent.ino;
          e.attr.st_mode = static_cast<mode_t>(ent.type) << 12;
        }
        counted = rc == 0;
      }
      if (e.ino) e.generation = node_generation();  // mount/daemon/node_generation.h
      need = fuse_add_direntry_plus(req, buf + used, size - used, ent.name.c_str(), &e, next);
      if (need > size - used) {
        if (counted) inodes_.forget(inode(e.ino), 1);
        break;
      }
    }
    used += need;
  }
  fuse_reply_buf(req, buf, used);
}

void EncryptedFs::releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  DirHandle* h = dir_handle_of(fi);
  untrack(h);
  delete h;
  fuse_reply_err(req, 0);
}

void EncryptedFs::fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  PathFd at = path_fd(inode(ino));
  if (!at.ok()) return (void)fuse_reply_err(req, -at.error());
  int fd = ::openat(at.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return (void)fuse_reply_err(req, errno);
  int r = datasync ? ::fdatasync(fd) : ::fsync(fd);
  int err = r == 0 ? 0 : errno;
  ::close(fd);
  fuse_reply_err(req, err);
}

}  // namespace gcfs::mount
