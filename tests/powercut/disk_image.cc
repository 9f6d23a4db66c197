#include "disk_image.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

namespace powercut {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

std::map<std::string, std::string> read_xattrs(const std::string& path) {
  std::map<std::string, std::string> out;
  const ssize_t n = ::llistxattr(path.c_str(), nullptr, 0);
  if (n <= 0) return out;
  std::vector<char> names(static_cast<std::size_t>(n));
  if (::llistxattr(path.c_str(), names.data(), names.size()) != n) return out;
  for (const char* name = names.data(); name < names.data() + n; name += std::strlen(name) + 1) {
    const ssize_t len = ::lgetxattr(path.c_str(), name, nullptr, 0);
    if (len < 0) continue;
    std::string value(static_cast<std::size_t>(len), '\0');
    if (::lgetxattr(path.c_str(), name, value.data(), value.size()) == len) out[name] = value;
  }
  return out;
}

std::string read_whole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("cannot open", path);
  std::string data;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      ::close(fd);
      fail("cannot read", path);
    }
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return data;
}

struct Loader {
  std::unordered_map<Ino, Node> nodes;
  std::map<std::pair<dev_t, ino_t>, Ino> seen;  // hard links
  Ino next = kRootIno + 1;

  Ino load(const std::string& path, bool is_root) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) fail("cannot stat", path);
    if (!is_root && !S_ISDIR(st.st_mode)) {
      const auto it = seen.find({st.st_dev, st.st_ino});
      if (it != seen.end()) return it->second;
    }
    const Ino ino = is_root ? kRootIno : next++;
    if (!S_ISDIR(st.st_mode)) seen[{st.st_dev, st.st_ino}] = ino;
    Node n;
    n.mode = st.st_mode;
    n.uid = st.st_uid;
    n.gid = st.st_gid;
    n.rdev = st.st_rdev;
    n.atime = st.st_atim;
    n.mtime = st.st_mtim;
    n.ctime = st.st_ctim;
    n.xattrs = read_xattrs(path);
    if (S_ISREG(st.st_mode)) n.data = read_whole(path);
    if (S_ISLNK(st.st_mode)) n.data = std::filesystem::read_symlink(path).string();
    if (S_ISDIR(st.st_mode))
      for (const auto& e : std::filesystem::directory_iterator(path))
        n.entries[e.path().filename().string()] = load(e.path().string(), false);
    nodes[ino] = std::move(n);
    return ino;
  }
};

void apply_metadata(const std::string& path, const Node& n) {
  if (::lchown(path.c_str(), n.uid, n.gid) != 0) fail("cannot chown", path);
  if (!S_ISLNK(n.mode) && ::chmod(path.c_str(), n.mode & 07777) != 0) fail("cannot chmod", path);
  for (const auto& [name, value] : n.xattrs)
    if (::lsetxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0) != 0) fail("cannot set xattr on", path);
  const timespec times[2] = {n.atime, n.mtime};
  ::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW);
}

struct Saver {
  const std::unordered_map<Ino, Node>& nodes;
  std::map<Ino, std::string> written;  // hard links

  void save(Ino ino, const std::string& path) {
    const auto it = nodes.find(ino);
    if (it == nodes.end()) return;
    const Node& n = it->second;
    if (!n.is_dir()) {
      const auto w = written.find(ino);
      if (w != written.end()) {
        if (::link(w->second.c_str(), path.c_str()) != 0) fail("cannot link", path);
        return;
      }
      written[ino] = path;
    }
    if (n.is_dir()) {
      if (ino != kRootIno && ::mkdir(path.c_str(), 0700) != 0) fail("cannot mkdir", path);
      for (const auto& [name, child] : n.entries) save(child, path + "/" + name);
    } else if (n.is_file()) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) fail("cannot create", path);
      std::size_t done = 0;
      while (done < n.data.size()) {
        const ssize_t w = ::write(fd, n.data.data() + done, n.data.size() - done);
        if (w <= 0) {
          ::close(fd);
          fail("cannot write", path);
        }
        done += static_cast<std::size_t>(w);
      }
      ::close(fd);
    } else if (S_ISLNK(n.mode)) {
      if (::symlink(n.data.c_str(), path.c_str()) != 0) fail("cannot symlink", path);
    } else if (::mknod(path.c_str(), n.mode, n.rdev) != 0) {
      fail("cannot mknod", path);
    }
    apply_metadata(path, n);
  }
};

}  // namespace

std::unordered_map<Ino, Node> load_tree(const std::string& dir) {
  Loader l;
  l.load(dir, true);
  return std::move(l.nodes);
}

void save_tree(const std::unordered_map<Ino, Node>& nodes, const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) std::filesystem::remove_all(e.path());
  Saver s{nodes, {}};
  s.save(kRootIno, dir);
}

}  // namespace powercut
