#include "fs/rekey/rekey_record_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "crypto/errors.h"
#include "fs/dir_iv.h"
#include "fs/safe_open.h"

namespace gcfs {
namespace {

const char* const kCopies[] = {kRekeyRecordName, kRekeyRecordCopyName};

bool exists_beneath(int dirfd, const char* name) {
  struct stat st {};
  return ::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

void write_one(int dirfd, const char* name, const std::vector<std::uint8_t>& bytes) {
  const std::string tmp = std::string(name) + ".tmp";
  ::unlinkat(dirfd, tmp.c_str(), 0);  // a temporary left by a crash: ours
  UniqueFd fd(::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400));
  if (!fd) throw UserError(std::string("cannot create ") + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      ::unlinkat(dirfd, tmp.c_str(), 0);
      throw UserError(std::string("cannot write ") + tmp + ": " + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || ::renameat(dirfd, tmp.c_str(), dirfd, name) != 0) {
    const int e = errno;
    ::unlinkat(dirfd, tmp.c_str(), 0);
    throw UserError(std::string("cannot write ") + name + ": " + std::strerror(e));
  }
  if (const int rc = sync_directory(dirfd); rc < 0)
    throw UserError(std::string("cannot sync CIPHERDIR after writing ") + name + ": " + std::strerror(-rc));
}

// The copy's bytes; nullopt with *why when it cannot be read as a file.
std::optional<std::vector<std::uint8_t>> read_one(int dirfd, const char* name, std::string* why) {
  OpenResult r = open_beneath(dirfd, name, FileType::Regular, O_RDONLY);
  if (!r) {
    *why = std::string(name) + " " + r.why();
    return std::nullopt;
  }
  std::vector<std::uint8_t> bytes;
  if (const int rc = read_capped(r.fd.get(), kMaxRekeyRecordBytes + 1, &bytes); rc < 0) {
    *why = std::string(name) + ": " + std::strerror(-rc);
    return std::nullopt;
  }
  return bytes;
}

}  // namespace

bool rekey_in_progress(const std::string& cipherdir) {
  UniqueFd dir(::open(cipherdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return false;
  for (const char* n : kCopies)
    if (exists_beneath(dir.get(), n)) return true;
  return false;
}

void refuse_during_rekey(const std::string& cipherdir, const std::string& what) {
  if (!rekey_in_progress(cipherdir)) return;
  throw VaultInUse(what + " refused: " + cipherdir + ": a re-key is in progress: run `gpucryptfs rekey` again to finish it "
                  "(it was interrupted; until it finishes, part of the vault is under the new master key)");
}

void write_rekey_record(int cipherdir_fd, const RekeyRecord& record) {
  const std::vector<std::uint8_t> bytes = record.to_bytes();
  for (const char* n : kCopies) write_one(cipherdir_fd, n, bytes);
}

std::optional<LoadedRekeyRecord> load_rekey_record(int cipherdir_fd, const SecretBytes& old_master, std::string* why_not) {
  bool any = false;
  std::string reasons;
  std::optional<LoadedRekeyRecord> found;
  for (const char* n : kCopies) {
    if (!exists_beneath(cipherdir_fd, n)) continue;
    any = true;
    std::string why;
    auto bytes = read_one(cipherdir_fd, n, &why);
    if (bytes) {
      try {
        RekeyRecord r = RekeyRecord::from_bytes(*bytes);
        if (auto m = r.open(old_master)) {
          if (!found) found = LoadedRekeyRecord{std::move(r), std::move(*m), ""};
          continue;
        }
        why = std::string(n) + " does not authenticate under this vault's master key (damaged or edited)";
      } catch (const CorruptData& e) {
        why = std::string(n) + ": " + e.what();
      }
    }
    reasons += (reasons.empty() ? "" : "; ") + why;
  }
  if (why_not) *why_not = reasons;
  if (!any) return std::nullopt;
  if (found) {
    found->note = reasons;
    return found;
  }
  throw CorruptData("the re-key record is damaged (" + reasons + ")");
}

std::optional<std::string> peek_rekey_record_config(int cipherdir_fd) {
  for (const char* n : kCopies) {
    std::string why;
    auto bytes = read_one(cipherdir_fd, n, &why);
    if (!bytes) continue;
    try {
      return RekeyRecord::from_bytes(*bytes).new_config_json;
    } catch (const CorruptData&) {
    }
  }
  return std::nullopt;
}

void remove_rekey_record(int cipherdir_fd) {
  for (const char* n : kCopies)
    if (::unlinkat(cipherdir_fd, n, 0) != 0 && errno != ENOENT)
      throw UserError(std::string("cannot remove ") + n + ": " + std::strerror(errno));
  if (const int rc = sync_directory(cipherdir_fd); rc < 0)
    throw UserError(std::string("cannot sync CIPHERDIR: ") + std::strerror(-rc));
}

}  // namespace gcfs
