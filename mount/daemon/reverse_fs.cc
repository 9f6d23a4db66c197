// Reverse mode's read-only filesystem over fs/reverse_view.h (reverse_fs.h).
#include "mount/daemon/reverse_fs.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fs/log.h"
#include "fs/unique_fd.h"
#include "mount/daemon/node_generation.h"

namespace gcfs::mount {
namespace {

ReverseFs& fs_of(fuse_req_t req) { return *static_cast<ReverseFs*>(fuse_req_userdata(req)); }

constexpr double kTimeout = 1.0;

// A directory's listing, taken at opendir so that offsets stay valid while it is read.
struct DirListing {
  std::vector<ReverseEntry> entries;
};

}  // namespace

const fuse_lowlevel_ops& ReverseFs::operations() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = [](void* u, fuse_conn_info* c) { static_cast<ReverseFs*>(u)->init(c); };
    o.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) { fs_of(r).lookup(r, p, n); };
    o.forget = [](fuse_req_t r, fuse_ino_t i, uint64_t n) {
      fs_of(r).forget(i, n);
      fuse_reply_none(r);
    };
    o.forget_multi = [](fuse_req_t r, size_t c, fuse_forget_data* f) {
      for (size_t i = 0; i < c; ++i) fs_of(r).forget(f[i].ino, f[i].nlookup);
      fuse_reply_none(r);
    };
    o.getattr = [](fuse_req_t r, fuse_ino_t i, fuse_file_info*) { fs_of(r).getattr(r, i); };
    o.readlink = [](fuse_req_t r, fuse_ino_t i) { fs_of(r).readlink(r, i); };
    o.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).open(r, i, fi); };
    o.read = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info* fi) { fs_of(r).read(r, i, s, off, fi); };
    o.release = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).release(r, i, fi); };
    o.opendir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).opendir(r, i, fi); };
    o.readdir = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info* fi) { fs_of(r).readdir(r, i, s, off, fi); };
    o.releasedir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).releasedir(r, i, fi); };
    o.statfs = [](fuse_req_t r, fuse_ino_t i) { fs_of(r).statfs(r, i); };
    return o;
  }();
  return ops;
}

void ReverseFs::init(fuse_conn_info* conn) {
  // libfuse sizes max_pages, which bounds reads as well as writes, from max_write: 1 MiB reads
  // give the engine batches of 256 chunks of 4 KiB instead of 32.
  conn->max_write = 1u << 20;
  conn->max_readahead = 1u << 20;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  log::info("serving a read-only reverse view (ciphertext of a plaintext folder)");
}

std::shared_ptr<const ReverseFs::Node> ReverseFs::node(fuse_ino_t ino) {
  if (ino == FUSE_ROOT_ID) {
    static const auto root = std::make_shared<const Node>();
    return root;
  }
  std::lock_guard lk(mu_);
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : it->second;
}

fuse_ino_t ReverseFs::remember(const std::string& dir, const ReverseEntry& e, const struct stat& st) {
  std::lock_guard lk(mu_);
  auto key = std::make_pair(dir, e.cipher_name);
  auto it = by_name_.find(key);
  fuse_ino_t ino;
  if (it != by_name_.end() && !nodes_[it->second]->same_as(st)) {
    // Another file under the same name: a node of its own (the old one lives until forgotten,
    // still bound to the file it was looked up as), so that no open in flight on the old node
    // ever reaches the new file.
    by_name_.erase(it);
    it = by_name_.end();
  }
  if (it != by_name_.end()) {
    ino = it->second;
    // The same name may stand for new content now (a virtual file, a name whose IV changed).
    auto fresh = std::make_shared<Node>(*nodes_[ino]);
    fresh->entry = e;
    nodes_[ino] = fresh;
  } else {
    ino = next_++;
    auto n = std::make_shared<Node>();
    n->dir = dir;
    n->entry = e;
    n->has_identity = true;
    n->dev = st.st_dev;
    n->ino = st.st_ino;
    nodes_[ino] = n;
    by_name_[key] = ino;
  }
  ++nodes_[ino]->nlookup;
  return ino;
}

void ReverseFs::forget(fuse_ino_t ino, std::uint64_t n) {
  if (ino == FUSE_ROOT_ID) return;
  std::lock_guard lk(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return;
  if (it->second->nlookup > n) {
    it->second->nlookup -= n;
    return;
  }
  auto named = by_name_.find({it->second->dir, it->second->entry.cipher_name});
  if (named != by_name_.end() && named->second == ino) by_name_.erase(named);
  nodes_.erase(it);
}

void ReverseFs::lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto p = node(parent);
  if (!p) return (void)fuse_reply_err(req, ESTALE);
  if (p->entry.kind != ReverseEntry::Kind::Plain) return (void)fuse_reply_err(req, ENOTDIR);
  const std::string dir = p->path();
  ReverseEntry e;
  struct stat dir_st {};
  if (int rc = view_.find(dir, name, &e, &dir_st); rc < 0) return (void)fuse_reply_err(req, -rc);
  if (!p->same_as(dir_st)) return (void)fuse_reply_err(req, ESTALE);  // another folder at that path now
  fuse_entry_param ep{};
  if (int rc = view_.stat(dir, e, &ep.attr); rc < 0) return (void)fuse_reply_err(req, -rc);
  ep.ino = remember(dir, e, ep.attr);
  ep.attr.st_ino = ep.ino;
  ep.attr_timeout = kTimeout;
  ep.entry_timeout = kTimeout;
  ep.generation = node_generation();  // node IDs restart with each mount: mount/daemon/node_generation.h
  fuse_reply_entry(req, &ep);
}

void ReverseFs::getattr(fuse_req_t req, fuse_ino_t ino) {
  auto n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ESTALE);
  struct stat st {};
  int rc;
  if (ino == FUSE_ROOT_ID) {
    ReverseEntry e;  // PLAINDIR itself: a Plain entry "." of directory ""
    e.plain_name = ".";
    rc = view_.stat("", e, &st);
  } else {
    rc = view_.stat(n->dir, n->entry, &st);
  }
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  if (!n->same_as(st)) return (void)fuse_reply_err(req, ESTALE);
  st.st_ino = ino;
  fuse_reply_attr(req, &st, kTimeout);
}

void ReverseFs::readlink(fuse_req_t req, fuse_ino_t ino) {
  auto n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ESTALE);
  if (n->entry.kind != ReverseEntry::Kind::Plain) return (void)fuse_reply_err(req, EINVAL);
  std::string link;
  if (int rc = view_.link_of(n->path(), &link); rc < 0) return (void)fuse_reply_err(req, -rc);
  fuse_reply_readlink(req, link.c_str());
}

void ReverseFs::open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
  auto n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ESTALE);
  fi->fh = 0;
  if (n->entry.kind == ReverseEntry::Kind::Plain) {
    UniqueFd fd;
    if (int rc = view_.open_file(n->path(), &fd); rc < 0) return (void)fuse_reply_err(req, -rc);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return (void)fuse_reply_err(req, errno);
    if (!n->same_as(st)) return (void)fuse_reply_err(req, ESTALE);  // not the file the kernel checked
    fi->fh = static_cast<std::uint64_t>(fd.release());
  }
  fi->keep_cache = 0;
  fuse_reply_open(req, fi);
}

void ReverseFs::read(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi) {
  auto n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ESTALE);
  if (n->entry.kind != ReverseEntry::Kind::Plain) {
    const std::string& c = n->entry.content;
    if (static_cast<std::size_t>(off) >= c.size()) return (void)fuse_reply_buf(req, nullptr, 0);
    return (void)fuse_reply_buf(req, c.data() + off, std::min(size, c.size() - static_cast<std::size_t>(off)));
  }
  std::vector<std::uint8_t> buf(size);
  const ssize_t got = view_.read(static_cast<int>(fi->fh), n->path(), static_cast<std::uint64_t>(off), size, buf.data());
  if (got < 0) return (void)fuse_reply_err(req, static_cast<int>(-got));
  fuse_reply_buf(req, reinterpret_cast<const char*>(buf.data()), static_cast<std::size_t>(got));
}

void ReverseFs::release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  if (fi->fh) ::close(static_cast<int>(fi->fh));
  fuse_reply_err(req, 0);
}

void ReverseFs::opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ESTALE);
  if (n->entry.kind != ReverseEntry::Kind::Plain) return (void)fuse_reply_err(req, ENOTDIR);
  auto listing = std::make_unique<DirListing>();
  struct stat dir_st {};
  if (int rc = view_.list(n->path(), &listing->entries, &dir_st); rc < 0) return (void)fuse_reply_err(req, -rc);
  if (!n->same_as(dir_st)) return (void)fuse_reply_err(req, ESTALE);
  fi->fh = reinterpret_cast<std::uint64_t>(listing.release());
  fuse_reply_open(req, fi);
}

void ReverseFs::readdir(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi) {
  auto* listing = reinterpret_cast<DirListing*>(fi->fh);
  std::vector<char> buf(size);
  std::size_t used = 0;
  // Offsets: 1 and 2 are "." and "..", then entry i is i + 3.
  for (off_t i = off; ; ++i) {
    std::string name;
    struct stat st {};
    if (i == 0) name = ".", st.st_mode = S_IFDIR;
    else if (i == 1) name = "..", st.st_mode = S_IFDIR;
    else if (static_cast<std::size_t>(i - 2) < listing->entries.size()) {
      const ReverseEntry& e = listing->entries[static_cast<std::size_t>(i - 2)];
      name = e.cipher_name;
      st.st_mode = e.type;  // a hint for find and the like; lookup gives the real attributes
    } else {
      break;
    }
    (void)ino;
    st.st_ino = static_cast<ino_t>(i + 1);  // a listing skips entries of inode number 0
    const std::size_t need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st, i + 1);
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void ReverseFs::releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<DirListing*>(fi->fh);
  fuse_reply_err(req, 0);
}

void ReverseFs::statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv {};
  if (int rc = view_.statfs(&sv); rc < 0) return (void)fuse_reply_err(req, -rc);
  sv.f_namemax = kMaxNameBytes;
  fuse_reply_statfs(req, &sv);
}

}  // namespace gcfs::mount
