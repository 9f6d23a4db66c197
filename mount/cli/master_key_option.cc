// --masterkey: printing the master key for paper and reading it back (master_key_option.h).
#include "mount/cli/master_key_option.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "crypto/key_ring.h"
#include "crypto/master_key_text.h"
#include "fs/master_key_probe.h"
#include "fs/vault.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {

void add_master_key_options(po::options_description& opts, MasterKeyOptions* o) {
  opts.add_options()("masterkey", po::bool_switch(&o->use),
                     "unlock with the master key that 'init' printed instead of the password, read from standard "
                     "input or the terminal (never from the command line); for a forgotten password or a lost config")(
      "masterkey-file", po::value(&o->file), "with --masterkey: read the master key from the first line of this file")(
      "chunk-size", po::value(&o->chunk_size),
      "with --masterkey, for a vault whose config is lost: its chunk size (by default the vault's files tell it)");
}

void print_master_key(std::ostream& out, const SecretBytes& key) {
  const SecretString text = format_master_key(key);
  out << "\nYour master key is:\n\n    ";
  out.flush();
  std::fwrite(text.data(), 1, text.size(), stdout);  // straight from secret memory, no std::string copy
  std::fflush(stdout);
  out << "\n\nIf the config file is ever lost or damaged, or the password forgotten, this key is the only way\n"
         "back into the vault ('gpucryptfs mount --masterkey', 'gpucryptfs passwd --masterkey'). Write it on\n"
         "paper and keep it somewhere safe, away from the computer. It is printed only this once; anyone who\n"
         "has it and the ciphertext reads everything.\n";
}

SecretBytes read_master_key(const MasterKeyOptions& o) {
  const SecretString text = read_master_key_text(o.file);
  try {
    return parse_master_key(text);
  } catch (const UserError& e) {
    throw CodedError(kExitBadMasterKey, e.what());
  }
}

namespace {

// A config of version 1 cannot be authenticated with the master key (its tag is the password's
// wrap; version 2's digest can, and is checked too), and a master-key unlock is what a user reaches for exactly when the password "fails",
// which an edited config also makes it do. So every field the mount would take from the config
// is checked against what the vault's authenticated files say: a chunk size or content format
// that they contradict would have new writes sealed in the wrong shape, destroying what is there
// (and passwd --masterkey would write it into a fresh config). Refused, naming the field.
void refuse_config_the_files_contradict(const VaultConfig& cfg, const ConfigPlace& place, const MasterKeyProbe& probe) {
  const std::string edited = ": the config was edited or damaged. Nothing was mounted or written; move the config "
                             "away to mount with the master key alone (the files then give its parameters)";
  const auto& fits = probe.chunk_sizes;
  if (probe.files_ok && std::find(fits.begin(), fits.end(), cfg.chunk_size) == fits.end())
    throw CodedError(kExitBadConfig, place.path() + " says \"chunk_size\": " + std::to_string(cfg.chunk_size) +
                                         ", but the vault's files were written with chunks of " +
                                         std::to_string(fits.front()) + " bytes" + (fits.size() > 1 ? " or more" : "") +
                                         edited);
  const std::size_t other = cfg.version == 1 ? probe.format2_files : cfg.version == 2 ? probe.format1_files : 0;
  if (other)
    throw CodedError(kExitBadConfig, place.path() + " says \"version\": " + std::to_string(cfg.version) + ", but " +
                                         std::to_string(other) + " of the vault's files have the headers of format " +
                                         std::to_string(cfg.version == 1 ? 2 : 1) + edited);
}

}  // namespace

VaultConfig config_for_master_key(const std::string& cipherdir, const ConfigPlace& place, const SecretBytes& key,
                                  const MasterKeyOptions& o, std::vector<std::string>* warnings, bool* config_found) {
  const KeyRing keys(key);
  const MasterKeyProbe probe = probe_master_key(cipherdir, keys);
  if (!probe.nothing_to_check() && !probe.key_fits())
    throw CodedError(kExitBadMasterKey, "the master key does not open this vault: " +
                                            std::to_string(probe.names_bad + probe.files_bad) +
                                            " of its names and files were checked and none decrypts (a mistyped key, "
                                            "or another vault's)");
  if (probe.nothing_to_check())
    warnings->push_back("the vault holds nothing yet to check the master key against: a wrong key would mount an "
                        "empty view");
  *config_found = false;
  try {
    VaultConfig cfg = load_vault_config(place);
    *config_found = true;
    if (!o.chunk_size.empty())
      throw po::error("--chunk-size is for a vault whose config is lost; " + place.path() + " gives it");
    refuse_config_the_files_contradict(cfg, place, probe);  // first: it names the field
    // A config with key slots carries a digest under the master key: its fields are checked there.
    if (!cfg.master_key_matches(key)) {
      if (probe.nothing_to_check())
        throw CodedError(kExitBadMasterKey, "the master key does not match the digest of " + place.path() +
                                                " (a mistyped key, another vault's, or an edited config)");
      throw CodedError(kExitBadConfig, place.path() + " was edited or damaged: its digest does not match the master "
                                                      "key, which the vault's files accept. Nothing was mounted or "
                                                      "written; move the config away to mount with the master key alone");
    }
    return cfg;
  } catch (const NotAVault&) {
  } catch (const CorruptData& e) {
    warnings->push_back(std::string("the config cannot be used (") + e.what() + "); going on without it");
  }
  std::uint32_t chunk = 0;
  const auto& fits = probe.chunk_sizes;
  if (!o.chunk_size.empty()) {
    const std::uint64_t c = parse_size_option("--chunk-size", o.chunk_size);
    if (!valid_chunk_size(c)) throw po::error("--chunk-size must be a power of two from 4K (4096) to 1M (1048576)");
    chunk = static_cast<std::uint32_t>(c);
    if (probe.files_ok && std::find(fits.begin(), fits.end(), chunk) == fits.end())
      throw CodedError(kExitBadMasterKey, "--chunk-size " + o.chunk_size + " does not fit this vault's files, which were "
                                              "written with chunks of " + std::to_string(fits.front()) + " bytes" +
                                              (fits.size() > 1 ? " (or more)" : ""));
  } else {
    // The smallest size every file sampled accepts: when no file pins it, that is init's
    // default (4 KiB), and any file the vault holds reads the same under it.
    chunk = fits.front();
    if (probe.chunk_size_pinned)
      warnings->push_back("no config: the chunk size, " + std::to_string(chunk) + " bytes, was read from the files");
    else
      warnings->push_back("no config: the chunk size could not be read from the files (none is longer than one "
                          "chunk); assuming " + std::to_string(chunk) + " bytes, the smallest that fits them: "
                          "give --chunk-size if the vault was made with another");
  }
  // The format, from the files' headers; with none to read, what init makes.
  int format = kDefaultDirectoryFormat;
  if (probe.format1_files || probe.format2_files) {
    format = probe.format2_files > probe.format1_files ? 2 : 1;
    warnings->push_back("no config: the content format, " + std::to_string(format) + ", was read from the files");
  }
  VaultConfig cfg = VaultConfig::defaults(chunk, VaultKind::Directory, format);
  if (probe.deterministic_names) {
    cfg.use_deterministic_names();
    warnings->push_back("no config: the root has no directory IV, so names are taken as deterministic "
                        "(init --deterministic-names)");
  }
  return cfg;
}

}  // namespace gcfs::cli
