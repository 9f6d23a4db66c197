// gpucryptfs volume create|resize, and the dispatch to volume mount (cmd_volume_mount.cc).
#include <sys/stat.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>

#include "crypto/errors.h"
#include "crypto/vault_config.h"
#include "fs/volume_container.h"
#include "mount/cli/commands.h"
#include "mount/cli/password.h"
#include "mount/cli/byte_size.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/exit_status.h"

namespace po = boost::program_options;

namespace gcfs::cli {

int cmd_volume_mount(int argc, char** argv);  // cmd_volume_mount.cc
int volume_info(int argc, char** argv);       // cmd_volume_tools.cc
int volume_passwd(int argc, char** argv);
int volume_fsck(int argc, char** argv);
int volume_keyslot(int argc, char** argv);   // cmd_keyslot.cc
int volume_rekey(int argc, char** argv);     // cmd_volume_rekey.cc

namespace {

// A SIZE option's value in bytes, chunk-rounded when chunk_size is given. A value that is no
// size (or 0) is a command-line mistake, so it becomes a usage error (exit 2, docs/USAGE.md)
// naming the option instead of parse_byte_size's plain failure.
std::uint64_t size_option(const char* option, const std::string& text, std::uint32_t chunk_size = 0) {
  const std::uint64_t bytes = parse_size_option(option, text);
  try {
    return chunk_size == 0 ? bytes : volume_size_for(bytes, chunk_size);
  } catch (const UserError& e) {
    throw po::error(std::string(option) + ": " + e.what());
  }
}

void volume_usage(std::ostream& out) {
  out << "usage: gpucryptfs volume create --size SIZE [--chunk-size N] [--scrypt-logn N] [--passfile F | --extpass CMD |\n"
         "                               --keyfile F] CONTAINER\n"
         "       gpucryptfs volume mount [UNLOCK] [--engine auto|cpu|gpu] [-f] [--read-only]\n"
         "                               [--log FILE] [--allow-expensive-kdf] CONTAINER MOUNTDIR\n"
         "       gpucryptfs volume resize --size SIZE [UNLOCK] [--allow-expensive-kdf] CONTAINER\n"
         "       gpucryptfs volume info CONTAINER\n"
         "       gpucryptfs volume passwd [UNLOCK] [--new-passfile F | --new-keyfile F] CONTAINER\n"
         "       gpucryptfs volume fsck [UNLOCK] [--engine auto|cpu|gpu] CONTAINER\n"
         "       gpucryptfs volume keyslot list CONTAINER\n"
         "       gpucryptfs volume keyslot add [UNLOCK] [--new-passfile F | --new-keyfile F] CONTAINER\n"
         "       gpucryptfs volume keyslot remove --slot N [UNLOCK] CONTAINER\n"
         "       gpucryptfs volume rekey [UNLOCK] [--slot-passfile N=F | --slot-keyfile N=F | --drop-slot N]...\n"
         "                               [--keep-only-unlocking-slot] [--engine auto|cpu|gpu] CONTAINER\n"
         "UNLOCK: --passfile F, --extpass CMD or --keyfile F (else the password is asked for).\n"
         "\nA volume is an encrypted block device in one sparse file; mounted, it is MOUNTDIR/volume.img.\n"
         "SIZE takes the suffixes K, M, G, T (binary). 'gpucryptfs volume SUBCOMMAND --help' lists the options.\n";
}

int volume_create(int argc, char** argv) {
  std::string size_text, chunk_text = std::to_string(kDefaultChunkSize / 1024) + "K", container;
  PasswordSource src;
  int logn = ScryptParams{}.log_n;
  po::options_description desc(
      "usage: gpucryptfs volume create --size SIZE [--chunk-size N] [--scrypt-logn N] [--passfile F] [--extpass CMD]\n"
      "                               CONTAINER\n\n"
      "Creates an encrypted volume in the new sparse file CONTAINER.\n\noptions");
  desc.add_options()("help,h", "this help")
      ("size", po::value(&size_text)->required(), "plaintext size of the volume (K, M, G, T suffixes)")
      ("chunk-size", po::value(&chunk_text)->default_value(chunk_text), "bytes per chunk: a power of two, 4K..1M")
      ("scrypt-logn", po::value(&logn)->default_value(logn), "scrypt cost N = 2^logn (10..28)")
      ("passfile", po::value(&src.passfile), "read the password from the first line of this file")
      ("extpass", po::value(&src.extpass), "run this command and read the password from its output")
      ("keyfile", po::value(&src.keyfile), "make key slot 0 a key file: its whole content (any bytes, up to 8 MiB)");
  if (!parse_command_line(argc, argv, desc, {{"CONTAINER", &container}}))
    return kExitOk;
  require_one_secret_source(src);
  if (logn < kMinScryptLogN || logn > kMaxScryptLogN)  // the range unlocking accepts without an option
    throw po::error("--scrypt-logn must be from " + std::to_string(kMinScryptLogN) + " to " + std::to_string(kMaxScryptLogN));
  const std::uint64_t chunk = size_option("--chunk-size", chunk_text);
  if (!valid_chunk_size(chunk))
    throw po::error("--chunk-size must be a power of two from 4K (4096) to 1M (1048576), got " + chunk_text);
  const auto chunk_size = static_cast<std::uint32_t>(chunk);
  const std::uint64_t size = size_option("--size", size_text, chunk_size);
  require_new_container(container);  // before the password is asked for, twice

  UnlockSecret secret = read_unlock_secret(src, "New volume password: ", true);
  ScryptParams params;
  params.log_n = logn;
  SecretBytes master;
  VaultConfig config =
      VaultConfig::create(secret.text.view(), chunk_size, params, VaultKind::Volume, &master, kFormatVersion, secret.kind);
  secret.text.clear();  // and wiped on the way out should create throw
  // volume_size is authenticated by the digest under the master key: made again now that it is set.
  config.volume_size = size;
  config.seal(master);
  VolumeContainer::create(container, config);
  std::cout << "Created volume " << container << ": " << format_byte_size(size) << " (" << size << " bytes), chunk size "
            << chunk_size << ", sparse: unwritten chunks take no space.\n"
            << "Mount it with: gpucryptfs volume mount " << container << " MOUNTDIR\n";
  return kExitOk;
}

int volume_resize(int argc, char** argv) {
  std::string size_text, container;
  PasswordSource src;
  bool allow_expensive_kdf = false;
  po::options_description desc("usage: gpucryptfs volume resize --size SIZE [--passfile F] [--extpass CMD] CONTAINER\n\n"
                               "Grows the unmounted volume in CONTAINER.\n\noptions");
  desc.add_options()("help,h", "this help")
      ("size", po::value(&size_text)->required(), "new plaintext size (K, M, G, T suffixes); only growing is supported")
      ("passfile", po::value(&src.passfile), "read the password from the first line of this file")
      ("extpass", po::value(&src.extpass), "run this command and read the password from its output");
  add_keyfile_option(desc, &src.keyfile);
  add_allow_expensive_kdf_option(desc, &allow_expensive_kdf);
  if (!parse_command_line(argc, argv, desc, {{"CONTAINER", &container}}))
    return kExitOk;
  require_one_secret_source(src);
  require_volume_container(container, "");
  VolumeContainer vol(container, true);  // exclusive lock: refuses a mounted volume
  vol.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
  // Early answers from the header as read, before the password: refused only when no copy of it
  // could allow the size. grow() checks again against the copy that authenticates.
  const std::uint64_t size = size_option("--size", size_text, vol.config().chunk_size);
  std::uint64_t smallest = vol.config().volume_size;
  for (const auto& copy : vol.header().copies) smallest = std::min(smallest, copy.config.volume_size);
  if (size < smallest)
    throw UserError("cannot shrink " + container + " from " + format_byte_size(smallest) + " to " +
                    format_byte_size(size) + ": only growing is supported (the filesystem inside may use the end)");
  std::uint64_t old_size = 0;
  {
    const UnlockSecret secret = read_unlock_secret(src, "Password: ");
    old_size = vol.grow(size, secret.text.view(), kdf_policy(allow_expensive_kdf), secret.kind);
  }  // the password is wiped here, or on the way out when grow throws
  if (vol.config().volume_size == old_size) {
    std::cout << container << " already has " << format_byte_size(size) << "; nothing changed.\n";
    return kExitOk;
  }
  std::cout << "Grew " << container << " from " << format_byte_size(old_size) << " to " << format_byte_size(size)
            << ". Grow the filesystem inside too (for ext4: resize2fs on the mounted volume.img).\n";
  return kExitOk;
}

}  // namespace

int cmd_volume(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    volume_usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string sub = argv[1];
  if (sub == "create") return run_command("volume create", [&] { return volume_create(argc - 1, argv + 1); });
  if (sub == "resize") return run_command("volume resize", [&] { return volume_resize(argc - 1, argv + 1); });
  if (sub == "mount") return run_command("volume mount", [&] { return cmd_volume_mount(argc - 1, argv + 1); });
  if (sub == "info") return run_command("volume info", [&] { return volume_info(argc - 1, argv + 1); });
  if (sub == "passwd") return run_command("volume passwd", [&] { return volume_passwd(argc - 1, argv + 1); });
  if (sub == "fsck") return run_command("volume fsck", [&] { return volume_fsck(argc - 1, argv + 1); });
  if (sub == "keyslot") return run_command("volume keyslot", [&] { return volume_keyslot(argc - 1, argv + 1); });
  if (sub == "rekey") return run_command("volume rekey", [&] { return volume_rekey(argc - 1, argv + 1); });
  // One line, as every other failure: the subcommands are one --help away.
  std::cerr << "gpucryptfs volume: unknown subcommand '" << sub << "' (see 'gpucryptfs volume --help')\n";
  return kExitUsage;
}

}  // namespace gcfs::cli
