// Reverse mode's core, without FUSE: the ciphertext view of a plaintext folder (PLAINDIR), laid
// out exactly as a forward vault of format 1 stores it (docs/FORMAT.md), so that a copy of the
// view mounts as an ordinary vault. Everything random in a forward vault is derived here
// (fs/reverse_derivation.h), so every mount shows the same bytes for the same plaintext.
//
// Per plaintext directory the view holds: gpucryptfs.diriv (the derived IV), each entry under
// its encrypted name (gcfs.longname.<hash> plus a .name file for a long one), a
// gcfs.longtarget.<hash> file for each symlink whose encoded target is too long for a link, and
// at the root gpucryptfs.conf (the reverse config) in place of PLAINDIR's .gpucryptfs.reverse.conf,
// which is never shown. Regular files are sealed chunk by chunk through the engine as they are
// read. Only what the view shows is read from PLAINDIR: directories are opened O_PATH beneath it,
// files only once fstat says they are regular, and FIFOs and devices are shown, never opened.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include <memory>

#include "crypto/chunk_engine.h"
#include "fs/path_exclusions.h"
#include "fs/path_translator.h"
#include "fs/reverse_derivation.h"
#include "fs/unique_fd.h"
#include "fs/vault.h"

namespace gcfs {

constexpr const char* kReverseConfigName = ".gpucryptfs.reverse.conf";

struct ReverseEntry {
  enum class Kind { Plain, DirIv, Config, LongNameFile, LongTargetFile };
  Kind kind = Kind::Plain;
  std::string cipher_name;
  std::string plain_name;  // Plain: its plaintext name; a long-name or long-target file: its entry's
  std::string content;     // the bytes of a file that exists only in the view
  mode_t type = S_IFREG;   // S_IFMT bits for readdir, 0 when the listing did not say
};

class ReverseView : public PathTranslator {
 public:
  // root_fd: PLAINDIR, opened O_PATH | O_DIRECTORY; owned from here on. config_json: what the
  // view shows as gpucryptfs.conf.
  ReverseView(int root_fd, const Vault& vault, ChunkEngine& engine, std::string config_json);

  // The view of the plaintext directory rel ("" for PLAINDIR), virtual files included. 0 or -errno.
  // dir_st (optional): the attributes of the directory listed, so that the caller can tell it is
  // the one it means.
  int list(const std::string& rel, std::vector<ReverseEntry>* out, struct stat* dir_st = nullptr);
  // The entry cipher_name of directory rel. 0, -ENOENT or -errno. dir_st as for list.
  int find(const std::string& rel, std::string_view cipher_name, ReverseEntry* out, struct stat* dir_st = nullptr);
  // The attributes the view shows for entry e of directory rel (ciphertext sizes). 0 or -errno.
  int stat(const std::string& rel, const ReverseEntry& e, struct stat* st);
  // The link a plaintext symlink at path shows (short or long form). 0 or -errno.
  int link_of(const std::string& path, std::string* link);
  // A descriptor of the regular file at path, for read(). 0 or -errno (-EACCES for anything but a
  // regular file, so nothing else is ever opened).
  int open_file(const std::string& path, UniqueFd* fd);
  // Ciphertext bytes [off, off + len) of the regular file at path, open as fd. Bytes read or -errno.
  ssize_t read(int fd, const std::string& path, std::uint64_t off, std::size_t len, std::uint8_t* out);

  // Plaintext paths left out of the view (mount --reverse --exclude...): not listed, not found,
  // so nothing of them shows (their long-name and long-target files neither; an excluded
  // directory's IV lives inside it). Set before serving.
  void set_exclusions(PathExclusions e) { exclusions_ = std::move(e); }

  // The control socket's mapping (fs/path_translator.h): every name on the way must be in the
  // view, so an excluded path is -ENOENT both ways; the last one too (unlike forward mode).
  int encrypt_path(const std::string& plain, std::string* out) override;
  int decrypt_path(const std::string& cipher, std::string* out) override;

  // PLAINDIR's filesystem, for statfs (df, and backup tools that check the room left).
  int statfs(struct statvfs* sv);

  static std::string join(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }

 private:
  int open_dir(const std::string& rel, UniqueFd* fd);
  // The stored link of a plaintext symlink whose target is `target`.
  StoredLink stored_link(const std::string& path, const std::string& target) const;

  UniqueFd root_;
  const Vault& vault_;
  ChunkEngine& engine_;
  ReverseDerivation derive_;
  // The names IV of the directory at rel: derived from its path, or the constant IV of a config
  // with deterministic names (fs/dir_iv_source.h), which needs nothing derived.
  DirIv name_iv(std::string_view rel) const { return vault_.dir_ivs().deterministic() ? DirIv{} : derive_.dir_iv(rel); }
  std::string config_json_;
  PathExclusions exclusions_;
  // Listings by directory, kept while the directory's change time stays the same: a lookup of
  // each entry would otherwise encrypt the whole directory again.
  struct Listing {
    std::vector<ReverseEntry> entries;
    std::unordered_map<std::string, std::size_t> by_name;  // cipher name -> index
  };
  int listing(const std::string& rel, std::shared_ptr<const Listing>* out, struct stat* dir_st);
  struct Cached {
    struct timespec ctime {}, mtime {};
    ino_t ino = 0;
    std::shared_ptr<const Listing> listing;
  };
  std::mutex mu_;
  std::map<std::string, Cached> cache_;
};

}  // namespace gcfs
