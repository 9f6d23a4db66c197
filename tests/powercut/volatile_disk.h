// The power-cut harness's model of a disk behind a volatile cache (README.md in this folder): a
// tree of inodes as programs see it ("live"), and for every inode the state that would survive a
// power cut ("durable"), which only fsync moves forward. Writes not yet fsynced are also kept as
// pieces (each write split at 512-byte sector boundaries), so that a cut can let any prefix or
// subset of them reach the durable state in place, as a disk does when the power goes mid-write.
//
// No FUSE here: powercut_fs.cc serves this model, tests/powercut_model_test.cc checks it alone.
// Not thread-safe: the filesystem runs single-threaded, which also makes every control command
// happen between two whole requests.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace powercut {

using Ino = std::uint64_t;
constexpr Ino kRootIno = 1;
constexpr std::size_t kSector = 512;

struct Node {
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  dev_t rdev = 0;
  nlink_t nlink = 0;  // names in the live tree (recounted at boot for the durable one)
  timespec atime{}, mtime{}, ctime{};
  std::string data;  // a regular file's contents, or a symbolic link's target
  std::map<std::string, Ino> entries;  // a directory's names
  std::map<std::string, std::string> xattrs;
  bool is_dir() const { return S_ISDIR(mode); }
  bool is_file() const { return S_ISREG(mode); }
};

// One sector-bounded part of a write that no fsync has covered yet.
struct Piece {
  Ino ino = 0;
  std::uint64_t offset = 0;
  std::string bytes;
};

// What reaches the durable state of the pieces a cut chooses from.
struct Tear {
  enum class Kind { none, all, prefix, subset } kind = Kind::none;
  std::uint64_t count_or_seed = 0;  // prefix: how many pieces; subset: the seed
};
// "none", "all", "prefix:K", "subset:SEED"; nullopt when malformed.
std::optional<Tear> parse_tear(const std::string& word);

class VolatileDisk {
 public:
  VolatileDisk();

  // --- the tree, as programs see it. Errors are negative errno values. -----------------------
  // The inode at an absolute path ("/", "/a/b"), or -ENOENT / -ENOTDIR.
  std::int64_t resolve(const std::string& path) const;
  const Node* node(Ino ino) const;
  // A new inode named `name` in directory `parent` (mode says the kind; data: a link's target).
  std::int64_t create(Ino parent, const std::string& name, mode_t mode, dev_t rdev, const std::string& data,
                      uid_t uid, gid_t gid);
  int link(Ino ino, Ino parent, const std::string& name);
  int remove(Ino parent, const std::string& name, bool dir);  // unlink or rmdir
  int rename(Ino from_dir, const std::string& from, Ino to_dir, const std::string& to, unsigned flags);
  int truncate(Ino ino, std::uint64_t size);
  // Writes count toward an armed cut; the write that triggers it fails with -EIO.
  std::int64_t write(Ino ino, std::uint64_t offset, const char* buf, std::size_t n);
  std::int64_t read(Ino ino, std::uint64_t offset, char* buf, std::size_t n) const;
  int punch_zeros(Ino ino, std::uint64_t offset, std::uint64_t length);  // written as zeros
  Node* mutable_node(Ino ino);  // attributes and xattrs (metadata: durable with the inode's fsync)
  void touch_ctime(Ino ino);

  // --- durability -------------------------------------------------------------------------
  int fsync(Ino ino);  // the inode's whole state (data, size, attributes, or a directory's names)
  void sync_all();     // as sync(2) on a disk that honours it: everything durable
  // The power goes now: of the unsynced pieces, those `tear` picks are written in place (within
  // each inode's durable size: growth is metadata, lost without fsync); the rest is gone.
  void cut(const Tear& tear);
  // Arms a cut at the nth write from now: every earlier write reaches the disk in order (or none of
  // them, keep_earlier false), of the nth `tear` picks among its own pieces, and nothing after.
  void arm(std::uint64_t nth, const Tear& tear, bool keep_earlier);
  void disarm() { armed_at_ = 0; }
  // Power back on: the live tree becomes the durable one.
  void boot();

  bool dead() const { return dead_; }
  std::uint64_t writes() const { return writes_; }
  std::size_t pending_pieces() const { return pending_.size(); }
  std::string status() const;

  // The durable tree as one map of inodes (for saving it to a directory), and loading one.
  const std::unordered_map<Ino, Node>& durable() const { return durable_; }
  void load_durable(std::unordered_map<Ino, Node> nodes);

 private:
  void apply_in_place(const Piece& p);
  void recount_links();

  std::unordered_map<Ino, Node> live_, durable_;
  std::vector<Piece> pending_;
  Ino next_ino_ = kRootIno + 1;
  bool dead_ = false;
  std::uint64_t writes_ = 0;
  std::uint64_t armed_at_ = 0;  // 0: not armed
  Tear armed_tear_;
  bool armed_keep_earlier_ = true;
};

}  // namespace powercut
