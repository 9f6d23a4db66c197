// The fuse_lowlevel_ops table: each entry forwards to the EncryptedFs the session was made with.
#include "mount/daemon/encrypted_fs.h"
#include "mount/daemon/encrypted_fs_handles.h"

namespace gcfs::mount {
namespace {

EncryptedFs& self(void* userdata) { return *static_cast<EncryptedFs*>(userdata); }

fuse_lowlevel_ops make_operations() {
  fuse_lowlevel_ops o{};
  o.init = [](void* u, fuse_conn_info* c) { self(u).init(c); };
  o.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) { fs_of(r).lookup(r, p, n); };
  o.forget = [](fuse_req_t r, fuse_ino_t i, uint64_t n) { fs_of(r).forget(r, i, n); };
  o.forget_multi = [](fuse_req_t r, size_t c, fuse_forget_data* f) { fs_of(r).forget_multi(r, c, f); };
  o.getattr = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).getattr(r, i, fi); };
  o.setattr = [](fuse_req_t r, fuse_ino_t i, struct stat* a, int v, fuse_file_info* fi) { fs_of(r).setattr(r, i, a, v, fi); };
  o.readlink = [](fuse_req_t r, fuse_ino_t i) { fs_of(r).readlink(r, i); };
  o.mknod = [](fuse_req_t r, fuse_ino_t p, const char* n, mode_t m, dev_t d) { fs_of(r).mknod(r, p, n, m, d); };
  o.mkdir = [](fuse_req_t r, fuse_ino_t p, const char* n, mode_t m) { fs_of(r).mkdir(r, p, n, m); };
  o.unlink = [](fuse_req_t r, fuse_ino_t p, const char* n) { fs_of(r).unlink(r, p, n); };
  o.rmdir = [](fuse_req_t r, fuse_ino_t p, const char* n) { fs_of(r).rmdir(r, p, n); };
  o.symlink = [](fuse_req_t r, const char* l, fuse_ino_t p, const char* n) { fs_of(r).symlink(r, l, p, n); };
  o.rename = [](fuse_req_t r, fuse_ino_t p, const char* n, fuse_ino_t np, const char* nn, unsigned f) {
    fs_of(r).rename(r, p, n, np, nn, f);
  };
  o.link = [](fuse_req_t r, fuse_ino_t i, fuse_ino_t np, const char* nn) { fs_of(r).link(r, i, np, nn); };
  o.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).open(r, i, fi); };
  o.create = [](fuse_req_t r, fuse_ino_t p, const char* n, mode_t m, fuse_file_info* fi) { fs_of(r).create(r, p, n, m, fi); };
  o.read = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info* fi) { fs_of(r).read(r, i, s, off, fi); };
  o.write = [](fuse_req_t r, fuse_ino_t i, const char* b, size_t s, off_t off, fuse_file_info* fi) {
    fs_of(r).write(r, i, b, s, off, fi);
  };
  o.release = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).release(r, i, fi); };
  // No FLUSH. Every write reaches the ciphertext before it is answered, and POSIX locks stay in
  // the kernel (no lock operations here), so a close has nothing to tell us: each open's reply
  // says FOPEN_NOFLUSH, and where the kernel sends FLUSH all the same (the writeback cache, which
  // it still flushes itself at close) the ENOSYS libfuse answers makes it stop for the mount. A
  // round trip less per closed file: a quarter of the requests of reading a tree of small files.
  o.fsync = [](fuse_req_t r, fuse_ino_t i, int d, fuse_file_info* fi) { fs_of(r).fsync(r, i, d, fi); };
  o.fallocate = [](fuse_req_t r, fuse_ino_t i, int m, off_t off, off_t len, fuse_file_info* fi) {
    fs_of(r).fallocate(r, i, m, off, len, fi);
  };
  o.opendir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).opendir(r, i, fi); };
  o.readdir = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info* fi) {
    fs_of(r).readdir(r, i, s, off, fi, false);
  };
  o.readdirplus = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t off, fuse_file_info* fi) {
    fs_of(r).readdir(r, i, s, off, fi, true);
  };
  o.releasedir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* fi) { fs_of(r).releasedir(r, i, fi); };
  o.fsyncdir = [](fuse_req_t r, fuse_ino_t i, int d, fuse_file_info* fi) { fs_of(r).fsyncdir(r, i, d, fi); };
  o.statfs = [](fuse_req_t r, fuse_ino_t i) { fs_of(r).statfs(r, i); };
  o.access = [](fuse_req_t r, fuse_ino_t i, int m) { fs_of(r).access(r, i, m); };
  o.setxattr = [](fuse_req_t r, fuse_ino_t i, const char* n, const char* v, size_t s, int f) {
    fs_of(r).setxattr(r, i, n, v, s, f);
  };
  o.getxattr = [](fuse_req_t r, fuse_ino_t i, const char* n, size_t s) { fs_of(r).getxattr(r, i, n, s); };
  o.listxattr = [](fuse_req_t r, fuse_ino_t i, size_t s) { fs_of(r).listxattr(r, i, s); };
  o.removexattr = [](fuse_req_t r, fuse_ino_t i, const char* n) { fs_of(r).removexattr(r, i, n); };
  return o;
}

}  // namespace

const fuse_lowlevel_ops& EncryptedFs::operations() {
  static const fuse_lowlevel_ops ops = make_operations();
  return ops;
}

}  // namespace gcfs::mount
