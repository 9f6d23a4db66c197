#include "fs/vault.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fs/dir_iv.h"

namespace gcfs {
namespace {

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

void require_empty_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw UserError("CIPHERDIR " + dir + ": " + std::strerror(errno) + " (create an empty directory first)");
  if (!S_ISDIR(st.st_mode)) throw UserError("CIPHERDIR " + dir + " is not a directory");
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw UserError("CIPHERDIR " + dir + ": " + std::strerror(errno));
  bool empty = true;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  ::closedir(d);
  if (!empty) throw UserError("CIPHERDIR " + dir + " is not empty; a new vault needs an empty directory");
}

}  // namespace

std::string config_path(const std::string& cipherdir) { return cipherdir + "/" + kConfigFileName; }

void Vault::create(const std::string& cipherdir, std::string_view password, std::uint32_t chunk_size,
                   const ScryptParams& scrypt) {
  require_empty_dir(cipherdir);
  VaultConfig cfg = VaultConfig::create(password, chunk_size, scrypt, VaultKind::Directory);
  FdCloser dir{::open(cipherdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0) throw UserError("cannot open " + cipherdir + ": " + std::strerror(errno));
  // The dir IV first: a vault whose config exists is complete.
  if (int rc = create_dir_iv(dir.fd, nullptr); rc < 0)
    throw UserError("cannot write " + cipherdir + "/" + kDirIvFileName + ": " + std::strerror(-rc));
  cfg.save_file(config_path(cipherdir));
}

VaultConfig Vault::load_config(const std::string& cipherdir) {
  const std::string path = config_path(cipherdir);
  struct stat st {};
  if (::stat(cipherdir.c_str(), &st) != 0)
    throw NotAVault("CIPHERDIR " + cipherdir + ": " + std::strerror(errno));
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT)
    throw NotAVault(cipherdir + " is not a gpucryptfs vault: it has no " + kConfigFileName +
                    " (create one with 'gpucryptfs init')");
  VaultConfig cfg = VaultConfig::load_file(path);
  if (cfg.kind != VaultKind::Directory)
    throw UserError(cipherdir + " holds a volume vault: use 'gpucryptfs volume mount'");
  return cfg;
}

std::unique_ptr<Vault> Vault::open(const std::string& cipherdir, const VaultConfig& config, std::string_view password) {
  SecretBytes master = config.unlock(password);
  return std::unique_ptr<Vault>(new Vault(cipherdir, config, master));
}

Vault::Vault(std::string cipherdir, VaultConfig config, const SecretBytes& master)
    : cipherdir_(std::move(cipherdir)),
      config_(std::move(config)),
      keys_(master),
      layout_(config_.chunk_size),
      names_(keys_) {}

}  // namespace gcfs
