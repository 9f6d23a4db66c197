// gpucryptfs init: create a new, empty directory vault.
#include <boost/program_options.hpp>
#include <iostream>

#include "crypto/errors.h"
#include "fs/vault.h"
#include "mount/cli_checks.h"
#include "mount/cli_options.h"
#include "mount/commands.h"
#include "mount/exit_status.h"
#include "mount/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {

int cmd_init(int argc, char** argv) {
  return run_command("init", [&]() -> int {
    std::string chunk_text = std::to_string(kDefaultDirectoryChunkSize / 1024) + "K";
    int scrypt_logn = ScryptParams{}.log_n;
    PasswordSource pw_src;
    std::string cipherdir;
    po::options_description opts("usage: gpucryptfs init [OPTIONS] CIPHERDIR\n\n"
                                 "Creates a vault in CIPHERDIR, which must exist and be empty.\n\noptions");
    opts.add_options()("help,h", "show this help")(
        "chunk-size", po::value(&chunk_text)->default_value(chunk_text),
        "plaintext bytes per encrypted chunk: a power of two from 4K (4096) to 1M (1048576)")(
        "scrypt-logn", po::value(&scrypt_logn)->default_value(scrypt_logn),
        "scrypt cost: N = 2^logn (10..28); lower is faster to unlock and easier to guess")(
        "passfile", po::value(&pw_src.passfile), "read the password from the first line of this file")(
        "extpass", po::value(&pw_src.extpass), "run this shell command and read the password from its output");
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir}})) return kExitOk;
    const std::uint64_t chunk = parse_size_option("--chunk-size", chunk_text);
    if (!valid_chunk_size(chunk))
      throw po::error("--chunk-size must be a power of two from 4K (4096) to 1M (1048576), got " + chunk_text);
    const auto chunk_size = static_cast<std::uint32_t>(chunk);
    if (scrypt_logn < kMinScryptLogN || scrypt_logn > kMaxScryptLogN)  // the range unlocking accepts without an option
      throw po::error("--scrypt-logn must be from " + std::to_string(kMinScryptLogN) + " to " + std::to_string(kMaxScryptLogN));
    require_empty_directory(cipherdir);  // before the password is asked for, twice
    ScryptParams scrypt;
    scrypt.log_n = scrypt_logn;
    {
      const SecretString password = read_password(pw_src, "Password for the new vault: ", true);
      Vault::create(cipherdir, password.view(), chunk_size, scrypt);
    }  // the password is wiped here, or on the way out when create throws
    std::cout << "Created a vault in " << cipherdir << " (chunk size " << chunk_size << ").\n"
              << "Mount it with: gpucryptfs mount " << cipherdir << " MOUNTPOINT\n";
    return kExitOk;
  });
}

}  // namespace gcfs::cli
