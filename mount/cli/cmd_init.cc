// gpucryptfs init: create a new, empty directory vault.
#include <boost/program_options.hpp>
#include <iostream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "crypto/errors.h"
#include "fs/config_file.h"
#include "fs/reverse_view.h"
#include "fs/unique_fd.h"
#include "fs/vault.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/config_option.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/master_key_option.h"
#include "mount/cli/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

// init --reverse: the config goes into the plaintext folder, hidden, beside the data it covers.
void create_reverse_config(const std::string& plaindir, const PasswordSource& pw_src, std::uint32_t chunk_size,
                           const ScryptParams& scrypt, SecretBytes* master, std::uint32_t long_name_max,
                           bool deterministic_names) {
  UniqueFd dir(::open(plaindir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir)
    throw CodedError(kExitBadCipherDir, "PLAINDIR " + plaindir + ": " + std::strerror(errno) +
                                            (errno == ENOTDIR ? "" : " (reverse mode needs an existing directory)"));
  struct stat st {};
  if (::fstatat(dir.get(), kReverseConfigName, &st, AT_SYMLINK_NOFOLLOW) == 0)
    throw CodedError(kExitBadCipherDir, plaindir + "/" + kReverseConfigName +
                                            " exists already: this folder has a reverse config (remove it first to "
                                            "make a new one; backups made with the old one then no longer match)");
  const UnlockSecret secret = read_unlock_secret(pw_src, "Password for the reverse view: ", true);
  const VaultConfig cfg = VaultConfig::create(secret.text.view(), chunk_size, scrypt, VaultKind::Directory, master,
                                              kFormatVersion, secret.kind, long_name_max, deterministic_names);
  write_config_file_at(dir.get(), plaindir, cfg, kReverseConfigName);
}

}  // namespace

int cmd_init(int argc, char** argv) {
  return run_command("init", [&]() -> int {
    std::string chunk_text = std::to_string(kDefaultDirectoryChunkSize / 1024) + "K";
    int scrypt_logn = ScryptParams{}.log_n;
    PasswordSource pw_src;
    std::string cipherdir, config_option;
    bool reverse = false, quiet = false, deterministic_names = false;
    int format = 0;  // not given: kDefaultDirectoryFormat, or 1 for --reverse
    int long_name_max = 0;  // not given: names up to 255 bytes
    po::options_description opts("usage: gpucryptfs init [OPTIONS] CIPHERDIR\n"
                                 "       gpucryptfs init --reverse [OPTIONS] PLAINDIR\n\n"
                                 "Creates a vault in CIPHERDIR, which must exist and be empty. With --reverse, writes "
                                 "the config of\nan encrypted read-only view of the plaintext folder PLAINDIR (hidden "
                                 "there as\n.gpucryptfs.reverse.conf) for 'gpucryptfs mount --reverse'.\n\noptions");
    opts.add_options()("help,h", "show this help")(
        "reverse", po::bool_switch(&reverse), "reverse mode: configure PLAINDIR for an encrypted view (backups)")(
        "chunk-size", po::value(&chunk_text)->default_value(chunk_text),
        "plaintext bytes per encrypted chunk: a power of two from 4K (4096) to 1M (1048576)")(
        "format", po::value(&format),
        "content format version: 2 (the default: chunk data at 4 KiB-aligned offsets, for O_DIRECT), or 1 "
        "(the format before; --reverse always shows format 1); docs/FORMAT.md")(
        "scrypt-logn", po::value(&scrypt_logn)->default_value(scrypt_logn),
        "scrypt cost: N = 2^logn (10..28); lower is faster to unlock and easier to guess")(
        "passfile", po::value(&pw_src.passfile), "read the password from the first line of this file")(
        "extpass", po::value(&pw_src.extpass), "run this shell command and read the password from its output")(
        "keyfile", po::value(&pw_src.keyfile),
        "make key slot 0 a key file instead of a password: the file's whole content (any bytes, up to 8 MiB)")(
        "longnamemax", po::value(&long_name_max),
        "no name in CIPHERDIR longer than this many bytes (62 to 255, default 255): longer encrypted names take "
        "the long form, for storage with short name limits (encrypted cloud remotes, eCryptfs, Windows shares)")(
        "deterministic-names", po::bool_switch(&deterministic_names),
        "no per-directory IV files: the same name encrypts the same in every directory, so a sync client has no "
        "gpucryptfs.diriv to conflict on (docs/SECURITY.md says what an observer learns from it)")(
        "quiet,q", po::bool_switch(&quiet), "print nothing on success: not even the master key (see 'gpucryptfs mount --masterkey')");
    add_config_option(opts, &config_option);
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir}})) return kExitOk;
    require_one_secret_source(pw_src);
    const std::uint64_t chunk = parse_size_option("--chunk-size", chunk_text);
    if (!valid_chunk_size(chunk))
      throw po::error("--chunk-size must be a power of two from 4K (4096) to 1M (1048576), got " + chunk_text);
    const auto chunk_size = static_cast<std::uint32_t>(chunk);
    if (format != 0 && (format < 1 || format > kMaxFormatVersion))
      throw po::error("--format must be 1 or " + std::to_string(kMaxFormatVersion) + ", got " + std::to_string(format));
    if (reverse && format > 1) throw po::error("--reverse shows a format 1 view; --format " + std::to_string(format) + " is not for it");
    if (format == 0) format = reverse ? kFormatVersion : kDefaultDirectoryFormat;
    if (scrypt_logn < kMinScryptLogN || scrypt_logn > kMaxScryptLogN)  // the range unlocking accepts without an option
      throw po::error("--scrypt-logn must be from " + std::to_string(kMinScryptLogN) + " to " + std::to_string(kMaxScryptLogN));
    if (long_name_max != 0 && (long_name_max < static_cast<int>(kMinLongNameMax) || long_name_max > static_cast<int>(kMaxLongNameMax)))
      throw po::error("--longnamemax must be from " + std::to_string(kMinLongNameMax) + " to " + std::to_string(kMaxLongNameMax) +
                      ", got " + std::to_string(long_name_max));
    if (long_name_max == static_cast<int>(kMaxLongNameMax)) long_name_max = 0;  // the default: no field needed
    ScryptParams scrypt;
    scrypt.log_n = scrypt_logn;
    SecretBytes master;  // printed once below, then wiped with the block
    if (reverse) {
      if (!config_option.empty()) throw po::error("--config is not for --reverse (its config lives in PLAINDIR)");
      create_reverse_config(cipherdir, pw_src, chunk_size, scrypt, &master, static_cast<std::uint32_t>(long_name_max),
                            deterministic_names);
      if (quiet) return kExitOk;
      std::cout << "Wrote the reverse config " << cipherdir << "/" << kReverseConfigName << " (chunk size " << chunk_size
                << ").\n";
      print_master_key(std::cout, master);
      std::cout << "\nShow the encrypted view with: gpucryptfs mount --reverse " << cipherdir << " MOUNTPOINT\n";
      return kExitOk;
    }
    require_empty_directory(cipherdir);  // before the password is asked for, twice
    const ConfigPlace place = config_place(cipherdir, config_option);
    if (place.outside) {
      struct stat st {};
      if (::lstat(place.path().c_str(), &st) == 0)
        throw CodedError(kExitBadCipherDir, "--config " + place.path() + " exists already; name a new file");
      char buf[PATH_MAX];
      const std::string real = ::realpath(cipherdir.c_str(), buf) ? std::string(buf) : cipherdir;
      if (place.dir == real || place.dir.starts_with(real + "/"))
        throw po::error("--config keeps the config outside CIPHERDIR; " + place.path() + " lies inside it");
    }
    {
      const UnlockSecret secret = read_unlock_secret(pw_src, "Password for the new vault: ", true);
      Vault::create(cipherdir, secret.text.view(), chunk_size, scrypt, &master, place.outside ? place.dir : "",
                    place.name, format, secret.kind, static_cast<std::uint32_t>(long_name_max), deterministic_names);
    }  // the password is wiped here, or on the way out when create throws
    if (quiet) return kExitOk;
    std::cout << "Created a vault in " << cipherdir << " (format " << format << ", chunk size " << chunk_size
              << (deterministic_names ? ", deterministic names" : "") << ")"
              << (place.outside ? ", its config in " + place.path() : std::string()) << ".\n";
    print_master_key(std::cout, master);
    std::cout << "\nMount it with: gpucryptfs mount " << (place.outside ? "--config " + place.path() + " " : std::string())
              << cipherdir << " MOUNTPOINT\n";
    return kExitOk;
  });
}

}  // namespace gcfs::cli
