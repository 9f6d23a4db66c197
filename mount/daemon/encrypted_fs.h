// The directory-mode filesystem behind the FUSE low-level API: plaintext names and contents on
// the mount side, ciphertext in CIPHERDIR. Each request maps its names with the parent's IV and
// runs the matching *at syscall on the parent's descriptor; file contents go through one shared
// ContentFile per open inode. Replies are sent here; errors are errno values, and every EIO is
// logged with the ciphertext path it concerns.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>
#include <mutex>
#include <optional>
#include <utility>
#include <string>
#include <unordered_set>

#include "fs/conflict_names.h"
#include "fs/name_mapping.h"
#include "fs/vault.h"
#include "mount/fuse_api.h"
#include "mount/daemon/inode_table.h"

namespace gcfs::mount {

struct FsOptions {
  double attr_timeout = 1.0;
  double entry_timeout = 1.0;
  // The kernel's writeback cache: small writes are gathered into pages before they reach us, so
  // a 512-byte write is not a read-modify-write of a whole chunk. The kernel then also places
  // O_APPEND writes and keeps the size and mtime while writes are cached. Off by default: the
  // kernel flushes a mount's cached pages from one writeback worker, which caps every writer of
  // the mount together near 1.3 GB/s (8 streams on 16 cores: 1.2 GB/s with it, 4.6 GB/s without).
  bool writeback_cache = false;
  // --badname: sync clients' conflict copies shown under readable names (fs/conflict_names.h).
  BadNamePatterns bad_names;
};

class EncryptedFs {
 public:
  // root_fd: CIPHERDIR, opened O_PATH or O_DIRECTORY; owned from here on.
  EncryptedFs(const Vault& vault, ChunkEngine& engine, int root_fd, FsOptions options);
  ~EncryptedFs();

  // The table libfuse calls; the userdata it passes must be this object.
  static const fuse_lowlevel_ops& operations();

  // --- requests (one per FUSE operation) ---
  void init(fuse_conn_info* conn);
  void lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void forget(fuse_req_t req, fuse_ino_t ino, std::uint64_t nlookup);
  void forget_multi(fuse_req_t req, std::size_t count, fuse_forget_data* forgets);
  void getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid, fuse_file_info* fi);
  void readlink(fuse_req_t req, fuse_ino_t ino);
  void mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
  void mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
  void unlink(fuse_req_t req, fuse_ino_t parent, const char* name);
  void rmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
  void symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name);
  void rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
              unsigned int flags);
  void link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname);
  void open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
  void read(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi);
  // READ without libfuse (FuseFilesystem::direct_read; self: the EncryptedFs): the same work as
  // read, its bytes at *data, or -errno.
  static long direct_read(void* self, std::uint64_t fh, std::uint64_t off, std::size_t size, unsigned char* room,
                          std::size_t room_bytes, const unsigned char** data);
  // WRITE without libfuse, when the setid bits need not go (FuseFilesystem::direct_write): the
  // bytes written, or -errno.
  static long direct_write(void* self, std::uint64_t fh, std::uint64_t off, const unsigned char* data, std::size_t size,
                           bool writepage);
  void write(fuse_req_t req, fuse_ino_t ino, const char* buf, std::size_t size, off_t off, fuse_file_info* fi);
  void release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
  void fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, fuse_file_info* fi);
  void opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void readdir(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi, bool plus);
  void releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
  void statfs(fuse_req_t req, fuse_ino_t ino);
  void access(fuse_req_t req, fuse_ino_t ino, int mask);
  void setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, std::size_t size, int flags);
  void getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, std::size_t size);
  void listxattr(fuse_req_t req, fuse_ino_t ino, std::size_t size);
  void removexattr(fuse_req_t req, fuse_ino_t ino, const char* name);

  // What fi->fh points to (defined in encrypted_fs_handles.h).
  struct FileHandle;
  struct DirHandle;

 private:

  Inode& inode(fuse_ino_t ino) { return inodes_.get(ino); }
  // The parent's IV (cached in the inode). 0 or -errno.
  int dir_iv(Inode& dir, DirIv* iv);
  // The disk name of `name` in dir: -ENAMETOOLONG past 255 bytes, -EIO without a readable IV.
  int disk_name(Inode& dir, const char* name, DiskName* out);
  // Stats entry in dir (and opens it, if a directory), and makes it an inode counted as looked
  // up; fills e. known: the stat of a non-directory the caller holds open (create), used instead
  // of a new look at the name, which may lead elsewhere by now.
  // dirfd: dir's descriptor (path_fd), held by the caller.
  int make_entry(Inode& dir, int dirfd, const std::string& entry, fuse_entry_param* e,
                 const struct stat* known = nullptr);
  // openat that, when descriptors run out, closes the cached ones no call is using and tries
  // again, and otherwise says in the log why it failed. The descriptor or -1 with errno set.
  int openat_or_warn(int dirfd, const char* name, int flags);
  // The shared path of mknod, symlink and link: store the name (and any long-name file), make
  // the entry with `make` (0 or an errno), give a new node to the caller, reply with the entry.
  void add_entry(fuse_req_t req, Inode& dir, const char* name, bool new_node,
                 const std::function<int(int dirfd, const char* entry)>& make);
  // Plaintext attributes of an inode: sizes of regular files and symlinks translated (a symlink
  // is read through readlinkat(fd, name)). An impossible ciphertext size is logged and -EIO, with
  // st_size set to 0.
  int plain_attr(Inode& inode, struct stat* st, int fd, const char* name);
  // The work of GETATTR and SETATTR: 0 with the plaintext attributes in *st, or -errno. The reply
  // is sent by the caller, after these have returned: an open file's content they hold
  // (hold_open_content) is let go here, and once the kernel has a reply it may close the file and
  // forget the inode, whose FORGET another thread then serves (a release after the reply once
  // freed the inode under it).
  int attr_of(Inode& in, fuse_file_info* fi, struct stat* st);
  // change_attr's 1 (kAnswerAsGetattr): nothing to change on the backing file, answer as GETATTR.
  int change_attr(fuse_req_t req, Inode& in, struct stat* attr, int valid, struct stat* st);
  static constexpr int kAnswerAsGetattr = 1;
  // Gives newly created entries to the requesting user when the daemon runs as root: fd when the
  // caller holds the new file open (so nothing swapped in under its name is given away), else
  // entry in dirfd.
  void give_to_caller(fuse_req_t req, int dirfd, const std::string& entry, int fd = -1);
  // Extended attributes of a backing path (a /proc/self/fd path), by plaintext name: sealed and
  // opened here. 0 or -errno (-ENODATA when absent, -EIO when the value does not decrypt).
  // in: the inode the path is of, named in the log when the value does not decrypt.
  // special: the file is neither regular nor a directory (its attributes are stored under
  // another prefix: fs/name_mapping.h).
  int read_xattr(const std::string& path, std::string_view name, std::vector<std::uint8_t>* plain, Inode& in);
  int write_xattr(const std::string& path, std::string_view name, std::span<const std::uint8_t> value, int flags,
                  bool special = false);
  int remove_xattr(const std::string& path, std::string_view name, bool special = false);
  // Before a write changes a regular file's data: its security.capability goes, as on ext4 (with
  // FUSE_HANDLE_KILLPRIV_V2 the kernel leaves that to the daemon). fd: the file's content
  // descriptor. A file known to have none costs nothing; an unknown one one fgetxattr.
  void drop_file_caps_for_write(Inode& in, int fd);
  // The stored (encrypted) name of a plaintext attribute name; nullopt for names not stored.
  std::optional<std::string> stored_xattr_name(std::string_view name, bool special = false);
  // setfacl: the mode follows the access ACL, which is stored only when the mode cannot say it.
  int set_access_acl(fuse_req_t req, const std::string& path, std::span<const std::uint8_t> value, int flags);
  // chmod: a stored access ACL takes the new permission bits. 0 or -errno.
  int chmod_acl(const std::string& path, mode_t mode, Inode& in);
  // What a new entry in dir gets: its mode (the requested one under the umask, or limited by the
  // directory's default ACL, which is then inherited into *acls) for the create calls to use.
  struct NewEntryAcls {
    std::vector<std::uint8_t> access;             // empty: none (the mode says it)
    std::vector<std::uint8_t> inherited_default;  // directories: the parent's default ACL
  };
  mode_t new_entry_mode(fuse_req_t req, Inode& dir, mode_t mode, bool is_dir, NewEntryAcls* acls);
  void store_new_entry_acls(const std::string& path, const NewEntryAcls& acls);
  // Drops the cached default ACL of in when name is the default ACL (set or removed).
  void forget_default_acl(Inode& in, std::string_view name);
  // The handle of the backing file entry in dirfd ("": dirfd itself) as bytes, "" when the
  // backing filesystem gives none.
  static std::string backing_handle(int dirfd, const char* entry);
  // LOOKUP of "." (parent false) or ".." in node ino, which the kernel sends for a file handle
  // whose node it has forgotten: the node found again through its remembered backing handle.
  int lookup_unnamed(fuse_ino_t ino, bool parent, fuse_entry_param* e);
  // Clears what a truncate, or a write, by this caller clears of the setuid and setgid bits
  // (setid_rules.h) on the open backing file fd.
  void truncate_clears_setid(fuse_req_t req, fuse_ino_t ino, int fd);
  void write_clears_setid(fuse_req_t req, Inode& in, fuse_ino_t ino, int fd);
  // The ciphertext path of an inode, for log messages.
  std::string label_of(Inode& inode) { return inodes_.label_of(inode); }
  // The label of the inode the kernel knows as id, made when a log message needs it (a file's
  // ContentFile keeps this, not the text: most files never log anything).
  FileLabel label_of_id(std::uint64_t id);
  // A descriptor of the inode for this call (InodeTable::path_fd): the only way to one, so no
  // call uses a descriptor the cache has closed.
  PathFd path_fd(Inode& inode) { return inodes_.path_fd(inode); }

  // The inode's shared ContentFile, created or upgraded to read-write as needed. fd_in: an
  // already opened read-write descriptor of a file made just now, empty (create), taken over.
  // 0 or -errno.
  int acquire_content(Inode& inode, bool writable, std::shared_ptr<ContentFile>* out, int fd_in = -1);
  void release_content(Inode& inode);
  // An open file's ContentFile held for one request: its descriptor stays open until this goes
  // (release_content then). Empty where the file was not open.
  class HeldContent {
   public:
    HeldContent() = default;
    HeldContent(EncryptedFs* fs, Inode* in, std::shared_ptr<ContentFile> file)
        : fs_(fs), in_(in), file_(std::move(file)) {}
    HeldContent(HeldContent&& o) noexcept : fs_(o.fs_), in_(o.in_), file_(std::move(o.file_)) {}
    HeldContent& operator=(HeldContent&&) = delete;
    ~HeldContent() {
      if (file_) fs_->release_content(*in_);
    }
    explicit operator bool() const { return file_ != nullptr; }
    ContentFile* operator->() const { return file_.get(); }

   private:
    EncryptedFs* fs_ = nullptr;
    Inode* in_ = nullptr;
    std::shared_ptr<ContentFile> file_;
  };
  // The inode's ContentFile when the file is open now, held; empty otherwise. Opens nothing.
  HeldContent hold_open_content(Inode& inode);
  // Writes a kept mtime (Inode::pending_mtime) to the open backing file fd; a failure is logged.
  void write_mtime(Inode& inode, int fd, const timespec& mtime);
  // Drops the kept mtime once `written` is on the backing file, unless a newer one replaced it.
  void forget_written_mtime(Inode& inode, const timespec& written);
  // Logs that the inode's backing file is not a regular file (path_fd says what it is) and
  // returns -EIO: it is never opened for I/O.
  int report_not_regular(Inode& inode, int path_fd);

  void reply_entry_or_err(fuse_req_t req, int rc, const fuse_entry_param& e);
  // FUSE_TMPFILE (a CREATE marked with __O_TMPFILE, mount/transport/session_io.h): an unnamed backing file
  // in parent's directory, open read-write, under the rules of create for mode, owner and ACLs,
  // answered as a CREATE; LINK names it later, a last close without one leaves nothing behind.
  void create_tmpfile(fuse_req_t req, fuse_ino_t parent, mode_t mode, fuse_file_info* fi);
  // The rest of create and create_tmpfile once the backing file fd (read-write, taken over) and
  // its entry e exist: the shared content, the handle, the reply.
  void finish_create(fuse_req_t req, Inode& in, int fd, const struct stat& st, const fuse_entry_param& e,
                     fuse_file_info* fi);
  // Every handle given to the kernel and not released yet. The kernel sends no RELEASE for what is
  // still open when the connection ends (a lazy unmount, a release still queued at unmount), so
  // what is left here when the filesystem goes is freed then, not leaked.
  FileHandle* track(FileHandle* h);
  DirHandle* track(DirHandle* h);
  void untrack(FileHandle* h);
  void untrack(DirHandle* h);
  int read_entries(Inode& dir, DirHandle& h);
  // Whether a listing has already said that entry of dir does not decrypt: said once per name,
  // not on every listing (a sync client's leftovers would fill the log otherwise).
  bool first_report_of_hidden(const std::string& dir_label, const std::string& entry);

  const Vault& vault_;
  ChunkEngine& engine_;
  InodeTable inodes_;
  FsOptions options_;
  bool running_as_root_;
  // The kernel enforces POSIX ACLs and leaves the umask to us (set in init).
  bool acls_ = false;
  // Write-only opens get direct I/O (init() says when; open() and finish_create() use it).
  bool direct_writes_ = false;
  // The kernel may hand out file handles that outlive its nodes (set in init).
  bool export_ = false;
  int handle_mount_fd_ = -1;  // CIPHERDIR opened for open_by_handle_at
  std::once_flag hot_names_once_;
  std::vector<std::pair<std::string, std::string>> hot_names_;  // plaintext, stored
  std::mutex handles_mu_;
  std::unordered_set<FileHandle*> open_files_;
  std::unordered_set<DirHandle*> open_dirs_;
  std::mutex hidden_mu_;
  std::unordered_set<std::string> hidden_reported_;  // "dir/entry", bounded (first_report_of_hidden)
};

}  // namespace gcfs::mount
