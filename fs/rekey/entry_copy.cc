#include "fs/rekey/entry_copy.h"

#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "fs/content/content_file.h"
#include "fs/log.h"
#include "fs/name_mapping.h"

namespace gcfs {
namespace {

// Plaintext per batch: 1024 chunks of 4 KiB at least, 8 MiB at most (a gpu engine's batches
// are best at some MiB; the read of the next batch overlaps the write of this one).
std::size_t batch_bytes(std::uint32_t chunk) { return std::max<std::size_t>(std::size_t{chunk} * 64, 8u << 20); }

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool all_zero(const std::uint8_t* p, std::size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

ssize_t list_names(const XattrPlace& p, char* buf, std::size_t n) {
  return p.fd >= 0 ? ::flistxattr(p.fd, buf, n) : ::llistxattr(p.path.c_str(), buf, n);
}
ssize_t get_value(const XattrPlace& p, const char* name, void* buf, std::size_t n) {
  return p.fd >= 0 ? ::fgetxattr(p.fd, name, buf, n) : ::lgetxattr(p.path.c_str(), name, buf, n);
}
int set_value(const XattrPlace& p, const std::string& name, const std::vector<std::uint8_t>& v) {
  const int rc = p.fd >= 0 ? ::fsetxattr(p.fd, name.c_str(), v.data(), v.size(), 0)
                           : ::lsetxattr(p.path.c_str(), name.c_str(), v.data(), v.size(), 0);
  return rc == 0 ? 0 : -errno;
}
int remove_value(const XattrPlace& p, const std::string& name) {
  const int rc = p.fd >= 0 ? ::fremovexattr(p.fd, name.c_str()) : ::lremovexattr(p.path.c_str(), name.c_str());
  return rc == 0 || errno == ENODATA ? 0 : -errno;
}

// The backing attribute names that are ours (user.gcfs.*, trusted.gcfs.*).
int stored_names(const XattrPlace& p, std::vector<std::string>* out) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    ssize_t n = list_names(p, nullptr, 0);
    if (n < 0) return errno == ENOTSUP ? 0 : -errno;
    out->clear();
    if (n == 0) return 0;  // most files: one call
    std::vector<char> buf(static_cast<std::size_t>(n) + 1);
    n = list_names(p, buf.data(), buf.size());
    if (n < 0 && errno == ERANGE) continue;
    if (n < 0) return -errno;
    out->clear();
    for (std::size_t i = 0; i < static_cast<std::size_t>(n);) {
      std::string name(buf.data() + i);
      i += name.size() + 1;
      if (NameMapping::is_stored_xattr_name(name)) out->push_back(std::move(name));
    }
    return 0;
  }
  return -EAGAIN;
}

int read_value(const XattrPlace& p, const std::string& name, std::vector<std::uint8_t>* out) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    ssize_t n = get_value(p, name.c_str(), nullptr, 0);
    if (n < 0) return -errno;
    out->resize(static_cast<std::size_t>(n));
    n = get_value(p, name.c_str(), out->data(), out->size());
    if (n < 0 && errno == ERANGE) continue;
    if (n < 0) return -errno;
    out->resize(static_cast<std::size_t>(n));
    return 0;
  }
  return -EAGAIN;
}

// The attribute `stored` re-encrypted under the new keys: its new name and value; false when it is
// under neither key's (not re-encrypted: damage for fsck to report) or already under the new one.
struct Rekeyed {
  std::string name;
  std::vector<std::uint8_t> value;
};
enum class XattrKey { New, Old, Neither };

XattrKey rekey_one(const RekeyPair& k, const std::string& stored, const std::vector<std::uint8_t>& value, bool special,
                   Rekeyed* out) {
  if (k.new_v.names().decrypt_xattr_name(stored)) return XattrKey::New;
  const auto plain = k.old_v.names().decrypt_xattr_name(stored);
  if (!plain) return XattrKey::Neither;
  const auto pv = k.old_v.names().decrypt_xattr_value(stored, value);
  if (!pv) return XattrKey::Neither;
  const auto name = k.new_v.names().encrypt_xattr_name(*plain, special);
  if (!name) return XattrKey::Neither;
  out->name = *name;
  out->value = k.new_v.names().encrypt_xattr_value(*name, *pv);
  return XattrKey::Old;
}

}  // namespace

namespace {

// Copies plaintext [begin, end) of `from` into `to`, in batches, the next one read while this one
// is written. All-zero chunks are not written: they stay holes. 0 or -errno (logged).
ssize_t copy_range(ContentFile& from, ContentFile& to, std::uint64_t begin, std::uint64_t end, std::uint32_t chunk,
                   const std::string& label, CopyTimes* times) {
  const std::size_t step = batch_bytes(chunk);
  const std::size_t room = static_cast<std::size_t>(std::min<std::uint64_t>(step, end - begin));
  std::vector<std::uint8_t> bufs[2] = {std::vector<std::uint8_t>(room), std::vector<std::uint8_t>(room)};
  double read_s = 0;  // written by the read-ahead only, read once it is joined
  auto read_batch = [&](std::uint64_t off, int b) -> ssize_t {
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(step, end - off));
    const ssize_t n = from.read(off, len, bufs[b].data());
    read_s += since(t0);
    return n == static_cast<ssize_t>(len) ? n : (n < 0 ? n : -EIO);
  };
  std::uint64_t off = begin;
  int cur = 0;
  std::future<ssize_t> next = std::async(std::launch::deferred, read_batch, begin, 0);
  ssize_t rc = 0;
  while (off < end) {
    const ssize_t n = next.get();
    if (n < 0) {
      log::error("rekey: cannot read " + label + " at byte " + std::to_string(off) + ": " + std::strerror(static_cast<int>(-n)));
      rc = n;
      break;
    }
    const std::uint64_t after = off + static_cast<std::uint64_t>(n);
    if (after < end) next = std::async(std::launch::async, read_batch, after, cur ^ 1);
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint8_t* p = bufs[cur].data();
    const std::size_t len = static_cast<std::size_t>(n);
    for (std::size_t i = 0; i < len && rc == 0;) {
      std::size_t j = i;
      while (j < len && all_zero(p + j, std::min<std::size_t>(chunk, len - j))) j += chunk;
      if (j >= len) break;
      std::size_t e = j;
      while (e < len && !all_zero(p + e, std::min<std::size_t>(chunk, len - e))) e += chunk;
      e = std::min(e, len);
      const ssize_t w = to.write(off + j, p + j, e - j);
      if (w != static_cast<ssize_t>(e - j)) {
        log::error("rekey: cannot write the re-keyed copy of " + label + ": " +
                   std::strerror(w < 0 ? static_cast<int>(-w) : EIO));
        rc = w < 0 ? w : -EIO;
      }
      i = e;
    }
    times->write_s += since(t0);
    if (rc != 0) break;
    off = after;
    cur ^= 1;
  }
  if (next.valid()) next.wait();
  times->read_s += read_s;
  return rc;
}

}  // namespace

std::int64_t copy_content(const RekeyPair& k, int old_fd, int new_fd, const std::string& label, CopyTimes* times,
                          int parts) {
  ContentFile from(old_fd, k.old_v.layout(), k.engine, k.old_v.keys(), FileLabel(label));
  ContentFile to(new_fd, k.new_v.layout(), k.engine, k.new_v.keys(), FileLabel(label + " (re-keyed copy)"));
  to.assume_new_empty();
  const std::int64_t size = from.plain_size();
  if (size <= 0) return size;
  const std::uint64_t total = static_cast<std::uint64_t>(size);
  const std::uint32_t chunk = k.old_v.config().chunk_size;
  const std::uint64_t step = batch_bytes(chunk);
  if (total < 4 * step) {
    const ssize_t rc = copy_range(from, to, 0, total, chunk, label, times);
    if (rc < 0) return rc;
    // Trailing zeros were not written: the size makes them a hole.
    if (const std::int64_t now = to.plain_size(); now >= 0 && static_cast<std::uint64_t>(now) < total)
      if (const int t = to.truncate(total); t < 0) return t;
    return size;
  }
  // A large file in several ranges at once (each with its own read-ahead): one reader and one
  // writer per file leave cores idle while the cipher is far from the bound. Each range holds two
  // batches at least. The full size first (a hole), so that every write lands inside the file:
  // writes that grow a file take its size lock alone, writes inside it run side by side.
  if (const int rc = to.truncate(total); rc < 0) return rc;
  const std::uint64_t n = std::clamp<std::uint64_t>(total / (2 * step), 2, static_cast<std::uint64_t>(std::max(2, parts)));
  const std::uint64_t span = (total / n + chunk - 1) / chunk * chunk;
  std::vector<CopyTimes> part_times(n);
  std::vector<ssize_t> rcs(n, 0);
  std::vector<std::thread> others;
  for (std::uint64_t i = 1; i < n; ++i)
    others.emplace_back([&, i] {
      rcs[i] = copy_range(from, to, std::min(total, i * span), i + 1 == n ? total : std::min(total, (i + 1) * span), chunk,
                          label, &part_times[i]);
    });
  rcs[0] = copy_range(from, to, 0, std::min(total, span), chunk, label, times);
  for (auto& t : others) t.join();
  for (std::uint64_t i = 1; i < n; ++i) times->read_s += part_times[i].read_s, times->write_s += part_times[i].write_s;
  for (const ssize_t rc : rcs)
    if (rc < 0) return rc;
  return size;
}

int copy_xattrs(const RekeyPair& k, const XattrPlace& from, const XattrPlace& to, bool special) {
  std::vector<std::string> names;
  if (const int rc = stored_names(from, &names); rc < 0) return rc;
  std::vector<std::uint8_t> value;
  for (const std::string& s : names) {
    if (const int rc = read_value(from, s, &value); rc < 0) {
      if (rc == -ENODATA) continue;
      return rc;
    }
    Rekeyed r;
    switch (rekey_one(k, s, value, special, &r)) {
      case XattrKey::New:
        if (const int rc = set_value(to, s, value); rc < 0) return rc;
        break;
      case XattrKey::Old:
        if (const int rc = set_value(to, r.name, r.value); rc < 0) return rc;
        break;
      case XattrKey::Neither:
        log::warning("rekey: an extended attribute " + s + " is under neither key: not copied");
        break;
    }
  }
  return 0;
}

int rekey_xattrs_in_place(const RekeyPair& k, const XattrPlace& at, bool special, void (*step)()) {
  std::vector<std::string> names;
  if (const int rc = stored_names(at, &names); rc < 0) return rc;
  std::vector<std::uint8_t> value;
  for (const std::string& s : names) {
    if (const int rc = read_value(at, s, &value); rc < 0) {
      if (rc == -ENODATA) continue;
      return rc;
    }
    Rekeyed r;
    if (rekey_one(k, s, value, special, &r) != XattrKey::Old) continue;
    if (const int rc = set_value(at, r.name, r.value); rc < 0) return rc;
    step();
    if (const int rc = remove_value(at, s); rc < 0) return rc;
    step();
  }
  return 0;
}

int copy_file_attributes(int fd, const struct stat& st) {
  // Two system calls of a small file's twenty saved where they change nothing: the owner when the
  // copy has it already, the mode when no chown came between (it clears set-id bits) and the
  // copy was made with it (make_copy creates it with the entry's permission bits).
  struct stat now {};
  if (::fstat(fd, &now) != 0) return -errno;
  const bool chown_needed = now.st_uid != st.st_uid || now.st_gid != st.st_gid;
  if (chown_needed && ::fchown(fd, st.st_uid, st.st_gid) != 0 && errno != EPERM) return -errno;
  if ((chown_needed || (now.st_mode & 07777) != (st.st_mode & 07777)) && ::fchmod(fd, st.st_mode & 07777) != 0)
    return -errno;
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::futimens(fd, times) != 0) return -errno;
  return 0;
}

}  // namespace gcfs
