#include "volatile_disk.h"

#include <errno.h>
#include <linux/fs.h>  // RENAME_NOREPLACE, RENAME_EXCHANGE

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <sstream>

namespace powercut {
namespace {

timespec now() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

// The pieces of `all` that `tear` lets reach the disk, in their order.
std::vector<const Piece*> pick(const std::vector<Piece>& all, const Tear& tear) {
  std::vector<const Piece*> out;
  std::mt19937_64 rng(tear.count_or_seed);
  for (std::size_t i = 0; i < all.size(); ++i) {
    bool keep = false;
    switch (tear.kind) {
      case Tear::Kind::none: keep = false; break;
      case Tear::Kind::all: keep = true; break;
      case Tear::Kind::prefix: keep = i < tear.count_or_seed; break;
      case Tear::Kind::subset: keep = (rng() & 1) != 0; break;
    }
    if (keep) out.push_back(&all[i]);
  }
  return out;
}

std::vector<Piece> split_at_sectors(Ino ino, std::uint64_t offset, const char* buf, std::size_t n) {
  std::vector<Piece> out;
  std::size_t done = 0;
  while (done < n) {
    const std::uint64_t at = offset + done;
    const std::size_t len = std::min<std::size_t>(n - done, kSector - at % kSector);
    out.push_back(Piece{ino, at, std::string(buf + done, len)});
    done += len;
  }
  return out;
}

}  // namespace

std::optional<Tear> parse_tear(const std::string& word) {
  if (word == "none") return Tear{Tear::Kind::none, 0};
  if (word == "all") return Tear{Tear::Kind::all, 0};
  const auto colon = word.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string kind = word.substr(0, colon), number = word.substr(colon + 1);
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const std::uint64_t value = std::stoull(number);
  if (kind == "prefix") return Tear{Tear::Kind::prefix, value};
  if (kind == "subset") return Tear{Tear::Kind::subset, value};
  return std::nullopt;
}

VolatileDisk::VolatileDisk() {
  Node root;
  root.mode = S_IFDIR | 0755;
  root.atime = root.mtime = root.ctime = now();
  live_[kRootIno] = root;
  durable_[kRootIno] = root;
}

std::int64_t VolatileDisk::resolve(const std::string& path) const {
  Ino at = kRootIno;
  std::size_t pos = 0;
  while (pos < path.size()) {
    if (path[pos] == '/') {
      ++pos;
      continue;
    }
    const std::size_t end = std::min(path.find('/', pos), path.size());
    const Node* dir = node(at);
    if (!dir || !dir->is_dir()) return -ENOTDIR;
    const auto it = dir->entries.find(path.substr(pos, end - pos));
    if (it == dir->entries.end()) return -ENOENT;
    at = it->second;
    pos = end;
  }
  return static_cast<std::int64_t>(at);
}

const Node* VolatileDisk::node(Ino ino) const {
  const auto it = live_.find(ino);
  return it == live_.end() ? nullptr : &it->second;
}

Node* VolatileDisk::mutable_node(Ino ino) {
  const auto it = live_.find(ino);
  return it == live_.end() ? nullptr : &it->second;
}

void VolatileDisk::touch_ctime(Ino ino) {
  if (Node* n = mutable_node(ino)) n->ctime = now();
}

std::int64_t VolatileDisk::create(Ino parent, const std::string& name, mode_t mode, dev_t rdev,
                                  const std::string& data, uid_t uid, gid_t gid) {
  Node* dir = mutable_node(parent);
  if (!dir || !dir->is_dir()) return -ENOTDIR;
  if (dir->entries.count(name)) return -EEXIST;
  Node n;
  n.mode = mode;
  n.rdev = rdev;
  n.uid = uid;
  n.gid = gid;
  n.nlink = 1;
  n.data = data;
  n.atime = n.mtime = n.ctime = now();
  const Ino ino = next_ino_++;
  // What a cut before any fsync of the inode leaves, should a durable directory name it: the inode
  // as created, empty (a symbolic link's target is written with its inode).
  Node empty = n;
  if (!S_ISLNK(mode)) empty.data.clear();
  durable_[ino] = empty;
  live_[ino] = n;
  dir->entries[name] = ino;
  dir->mtime = dir->ctime = now();
  return static_cast<std::int64_t>(ino);
}

int VolatileDisk::link(Ino ino, Ino parent, const std::string& name) {
  Node* n = mutable_node(ino);
  Node* dir = mutable_node(parent);
  if (!n || !dir || !dir->is_dir()) return -ENOENT;
  if (n->is_dir()) return -EPERM;
  if (dir->entries.count(name)) return -EEXIST;
  dir->entries[name] = ino;
  ++n->nlink;
  n->ctime = dir->mtime = dir->ctime = now();
  return 0;
}

int VolatileDisk::remove(Ino parent, const std::string& name, bool want_dir) {
  Node* dir = mutable_node(parent);
  if (!dir || !dir->is_dir()) return -ENOTDIR;
  const auto it = dir->entries.find(name);
  if (it == dir->entries.end()) return -ENOENT;
  Node& n = live_[it->second];
  if (want_dir && !n.is_dir()) return -ENOTDIR;
  if (!want_dir && n.is_dir()) return -EISDIR;
  if (want_dir && !n.entries.empty()) return -ENOTEMPTY;
  if (n.nlink > 0) --n.nlink;
  n.ctime = dir->mtime = dir->ctime = now();
  dir->entries.erase(it);
  return 0;
}

int VolatileDisk::rename(Ino from_dir, const std::string& from, Ino to_dir, const std::string& to, unsigned flags) {
  Node* a = mutable_node(from_dir);
  Node* b = mutable_node(to_dir);
  if (!a || !b || !a->is_dir() || !b->is_dir()) return -ENOTDIR;
  const auto it = a->entries.find(from);
  if (it == a->entries.end()) return -ENOENT;
  const Ino src = it->second;
  const auto jt = b->entries.find(to);
  if (flags & RENAME_EXCHANGE) {
    if (jt == b->entries.end()) return -ENOENT;
    std::swap(it->second, jt->second);
  } else {
    if (jt != b->entries.end()) {
      if (flags & RENAME_NOREPLACE) return -EEXIST;
      const Ino dst = jt->second;
      if (dst == src) return 0;
      Node& d = live_[dst];
      if (d.is_dir() && !live_[src].is_dir()) return -EISDIR;
      if (!d.is_dir() && live_[src].is_dir()) return -ENOTDIR;
      if (d.is_dir() && !d.entries.empty()) return -ENOTEMPTY;
      if (d.nlink > 0) --d.nlink;
      d.ctime = now();
    }
    a->entries.erase(from);
    b->entries[to] = src;
  }
  live_[src].ctime = a->mtime = a->ctime = b->mtime = b->ctime = now();
  return 0;
}

int VolatileDisk::truncate(Ino ino, std::uint64_t size) {
  if (dead_) return -EIO;
  Node* n = mutable_node(ino);
  if (!n) return -ENOENT;
  if (!n->is_file()) return -EINVAL;
  n->data.resize(size, '\0');
  n->mtime = n->ctime = now();
  return 0;
}

std::int64_t VolatileDisk::write(Ino ino, std::uint64_t offset, const char* buf, std::size_t n) {
  if (dead_) return -EIO;
  Node* f = mutable_node(ino);
  if (!f) return -ENOENT;
  if (!f->is_file()) return -EINVAL;
  ++writes_;
  std::vector<Piece> pieces = split_at_sectors(ino, offset, buf, n);
  if (armed_at_ != 0 && writes_ == armed_at_) {
    if (armed_keep_earlier_)
      for (const Piece& p : pending_) apply_in_place(p);
    for (const Piece* p : pick(pieces, armed_tear_)) apply_in_place(*p);
    pending_.clear();
    dead_ = true;
    armed_at_ = 0;
    return -EIO;  // the power went during this write: no one is left to hear the answer
  }
  if (f->data.size() < offset + n) f->data.resize(offset + n, '\0');
  std::memcpy(f->data.data() + offset, buf, n);
  f->mtime = f->ctime = now();
  for (Piece& p : pieces) pending_.push_back(std::move(p));
  return static_cast<std::int64_t>(n);
}

std::int64_t VolatileDisk::read(Ino ino, std::uint64_t offset, char* buf, std::size_t n) const {
  if (dead_) return -EIO;
  const Node* f = node(ino);
  if (!f) return -ENOENT;
  if (!f->is_file()) return -EISDIR;
  if (offset >= f->data.size()) return 0;
  const std::size_t len = std::min<std::size_t>(n, f->data.size() - offset);
  std::memcpy(buf, f->data.data() + offset, len);
  return static_cast<std::int64_t>(len);
}

int VolatileDisk::punch_zeros(Ino ino, std::uint64_t offset, std::uint64_t length) {
  const Node* f = node(ino);
  if (!f) return -ENOENT;
  if (offset >= f->data.size()) return dead_ ? -EIO : 0;
  const std::size_t len = std::min<std::uint64_t>(length, f->data.size() - offset);
  const std::string zeros(len, '\0');
  const std::int64_t r = write(ino, offset, zeros.data(), zeros.size());
  return r < 0 ? static_cast<int>(r) : 0;
}

int VolatileDisk::fsync(Ino ino) {
  if (dead_) return -EIO;
  const Node* n = node(ino);
  if (!n) return -ENOENT;
  durable_[ino] = *n;
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [&](const Piece& p) { return p.ino == ino; }),
                 pending_.end());
  return 0;
}

void VolatileDisk::sync_all() {
  if (dead_) return;
  durable_ = live_;
  pending_.clear();
}

void VolatileDisk::cut(const Tear& tear) {
  if (!dead_)
    for (const Piece* p : pick(pending_, tear)) apply_in_place(*p);
  pending_.clear();
  dead_ = true;
  armed_at_ = 0;
}

void VolatileDisk::arm(std::uint64_t nth, const Tear& tear, bool keep_earlier) {
  armed_at_ = nth == 0 ? 0 : writes_ + nth;
  armed_tear_ = tear;
  armed_keep_earlier_ = keep_earlier;
}

void VolatileDisk::boot() {
  live_ = durable_;
  pending_.clear();
  recount_links();
  durable_ = live_;
  dead_ = false;
  armed_at_ = 0;
}

void VolatileDisk::load_durable(std::unordered_map<Ino, Node> nodes) {
  durable_ = std::move(nodes);
  if (!durable_.count(kRootIno)) durable_[kRootIno] = live_[kRootIno];
  next_ino_ = kRootIno + 1;
  for (const auto& [ino, n] : durable_) next_ino_ = std::max(next_ino_, ino + 1);
  boot();
}

// A piece reaches a durable file in place only: bytes past its durable size would need the size
// to grow, which is metadata that only an fsync commits.
void VolatileDisk::apply_in_place(const Piece& p) {
  const auto it = durable_.find(p.ino);
  if (it == durable_.end() || !it->second.is_file()) return;
  std::string& data = it->second.data;
  if (p.offset >= data.size()) return;
  const std::size_t len = std::min<std::size_t>(p.bytes.size(), data.size() - p.offset);
  std::memcpy(data.data() + p.offset, p.bytes.data(), len);
}

// After a cut, links are what the durable directories say (a name whose directory was never
// fsynced is gone), counted over the tree reachable from the root.
void VolatileDisk::recount_links() {
  for (auto& [ino, n] : live_) n.nlink = 0;
  std::deque<Ino> todo{kRootIno};
  live_[kRootIno].nlink = 1;
  while (!todo.empty()) {
    const Ino dir = todo.front();
    todo.pop_front();
    for (const auto& [name, child] : live_[dir].entries) {
      Node& c = live_[child];
      if (c.is_dir() && c.nlink > 0) continue;  // a directory is reached once
      if (++c.nlink == 1 && c.is_dir()) todo.push_back(child);
    }
  }
}

std::string VolatileDisk::status() const {
  std::ostringstream out;
  out << "state=" << (dead_ ? "dead" : "running") << " writes=" << writes_ << " pending=" << pending_.size()
      << " armed=" << (armed_at_ ? std::to_string(armed_at_ - writes_) : std::string("-")) << "\n";
  return out.str();
}

}  // namespace powercut
