// --config FILE, a vault's config kept outside CIPHERDIR (config_option.h).
#include "mount/cli/config_option.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "crypto/errors.h"
#include "fs/config_file.h"
#include "fs/unique_fd.h"
#include "fs/vault.h"

namespace po = boost::program_options;

namespace gcfs::cli {

void add_config_option(po::options_description& opts, std::string* value) {
  opts.add_options()("config", po::value(value),
                     "the vault's config file, kept outside CIPHERDIR (default: CIPHERDIR/gpucryptfs.conf)");
}

ConfigPlace config_place(const std::string& cipherdir, const std::string& option) {
  if (option.empty()) return {cipherdir, kConfigFileName, false};
  std::string path = option;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf)) path = buf;  // an existing file, links followed
  const auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") throw po::error("--config " + option + ": name a file");
  if (!::realpath(dir.c_str(), buf)) throw po::error("--config " + option + ": its directory " + dir + ": " + std::strerror(errno));
  dir = buf;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw po::error("--config " + option + ": " + dir + " is not a directory");
  return {dir, name, true};
}

VaultConfig load_vault_config(const ConfigPlace& place) {
  if (!place.outside) return Vault::load_config(place.dir);
  struct stat st {};
  if (::lstat(place.path().c_str(), &st) != 0 && errno == ENOENT)
    throw NotAVault("--config " + place.path() + ": no such file (it is written by 'gpucryptfs init --config')");
  return Vault::load_config(place.dir, place.name);
}

void save_vault_config(const ConfigPlace& place, const VaultConfig& config) {
  UniqueFd dir(::open(place.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw UserError("cannot open " + place.dir + ": " + std::strerror(errno));
  write_config_file_at(dir.get(), place.dir, config, place.name);
}

}  // namespace gcfs::cli
