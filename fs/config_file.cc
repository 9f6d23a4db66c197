#include "fs/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "crypto/errors.h"
#include "fs/safe_open.h"
#include "fs/unique_fd.h"
#include "fs/vault_errors.h"

namespace gcfs {
namespace {

constexpr const char* kConfigTempSuffix = ".tmp";

std::string errno_text(int e) { return std::strerror(e); }

// Writes all of text to fd; 0 or the errno of the failure.
int write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

VaultConfig read_config_file(const std::string& cipherdir, const std::string& file_name) {
  const std::string path = cipherdir + "/" + file_name;
  // O_DIRECTORY fails with ENOTDIR before a FIFO or device named as CIPHERDIR could be opened.
  const int dfd = ::open(cipherdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    const int e = errno;
    if (e == ENOENT) throw NotAVault("CIPHERDIR " + cipherdir + ": " + errno_text(e));
    if (e == ENOTDIR) throw NotAVault("CIPHERDIR " + cipherdir + " is not a directory, so not a gpucryptfs vault");
    throw UserError("cannot open CIPHERDIR " + cipherdir + ": " + errno_text(e));
  }
  const UniqueFd dir(dfd);
  const OpenResult r = open_beneath(dir.get(), file_name, FileType::Regular, O_RDONLY);
  if (!r) {
    switch (r.error) {
      case ENOENT:
        throw NotAVault(cipherdir + " is not a gpucryptfs vault: it has no " + file_name +
                        (file_name == kConfigFileName ? " (create one with 'gpucryptfs init')"
                                                      : " (create one with 'gpucryptfs init --reverse')"));
      case ELOOP:
        throw CorruptData(path +
                          " is a symbolic link: the config is never read through a link in CIPHERDIR, where a sync "
                          "tool or another user may have put it (if you made the link, replace it with the file "
                          "it points to)");
      case EUCLEAN:
        throw CorruptData(path + " is a " + file_type_name(r.found_type) +
                          ", not a config file: the vault's config is damaged or was replaced");
      default:
        throw UserError("cannot read the config " + path + ": " + r.why());
    }
  }
  std::vector<std::uint8_t> bytes;
  const int rc = read_capped(r.fd.get(), kMaxConfigFileBytes, &bytes);
  if (rc == -EFBIG) {
    struct stat st {};
    ::fstat(r.fd.get(), &st);
    throw CorruptData(path + " is " + std::to_string(st.st_size) + " bytes, larger than any config (at most " +
                      std::to_string(kMaxConfigFileBytes) + "): it is damaged or was replaced, and is not read");
  }
  if (rc == -EAGAIN) throw CorruptData(path + " kept growing while it was read: something is writing it");
  if (rc < 0) throw UserError("cannot read the config " + path + ": " + errno_text(-rc));
  try {
    return VaultConfig::from_json(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  } catch (const CorruptData& e) {
    throw CorruptData(path + ": " + e.what());
  }
}

void write_config_file_at(int dfd, const std::string& cipherdir, const VaultConfig& config,
                          const std::string& file_name) {
  const std::string name = file_name;
  const std::string tmp = name + kConfigTempSuffix;
  const std::string shown_tmp = cipherdir + "/" + tmp;
  const std::string text = config.to_json();
  // A temporary left by an interrupted save goes first, whatever it is: unlinkat removes a link,
  // never what it points to. The new one is then created with O_EXCL, so nothing that appears
  // under its name meanwhile is written through.
  if (::unlinkat(dfd, tmp.c_str(), 0) != 0 && errno != ENOENT)
    throw UserError("cannot remove the stale temporary " + shown_tmp + ": " + errno_text(errno));
  OpenResult r = open_beneath(dfd, tmp, FileType::Regular, O_WRONLY | O_CREAT | O_EXCL, 0400);
  if (!r) throw UserError("cannot write " + shown_tmp + ": " + r.why());
  auto fail = [&](const std::string& what, int e) {
    r.fd.reset();
    ::unlinkat(dfd, tmp.c_str(), 0);
    throw UserError(what + ": " + errno_text(e));
  };
  // 0400 whatever the caller's umask: the config is replaced, never edited in place.
  if (::fchmod(r.fd.get(), 0400) != 0) fail("cannot set the mode of " + shown_tmp, errno);
  if (const int e = write_all(r.fd.get(), text); e != 0) fail("cannot write " + shown_tmp, e);
  if (::fsync(r.fd.get()) != 0) fail("cannot sync " + shown_tmp, errno);
  if (::close(r.fd.release()) != 0) fail("cannot write " + shown_tmp, errno);
  // renameat replaces whatever holds the name (a planted link is replaced, not followed).
  if (::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0)
    fail("cannot replace " + cipherdir + "/" + name, errno);
  // The rename reaches the disk with the directory, not with the file: without this, a crash
  // soon after init or passwd can bring back the old config (or none at all).
  (void)::fsync(dfd);  // best effort: some filesystems refuse fsync on directories
}

void write_config_file(const std::string& cipherdir, const VaultConfig& config) {
  const int dfd = ::open(cipherdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw UserError("cannot open CIPHERDIR " + cipherdir + ": " + errno_text(errno));
  const UniqueFd dir(dfd);
  write_config_file_at(dir.get(), cipherdir, config);
}

}  // namespace gcfs
