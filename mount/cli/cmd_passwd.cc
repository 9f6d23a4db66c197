// gpucryptfs passwd: wrap the same master key under a new password. File contents and names are
// untouched; only gpucryptfs.conf is rewritten (atomically).
#include <boost/program_options.hpp>
#include <iostream>
#include <vector>

#include "crypto/errors.h"
#include "fs/config_file.h"
#include "fs/vault.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/config_option.h"
#include "mount/cli/master_key_option.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {

int cmd_passwd(int argc, char** argv) {
  return run_command("passwd", [&]() -> int {
    PasswordSource old_src, new_src;
    std::string cipherdir, config_option;
    bool allow_expensive_kdf = false;
    MasterKeyOptions master_key;
    int scrypt_logn = ScryptParams{}.log_n;
    po::options_description opts("usage: gpucryptfs passwd [OPTIONS] CIPHERDIR\n"
                                 "       gpucryptfs passwd --masterkey [OPTIONS] CIPHERDIR\n\n"
                                 "Changes the password of the vault in CIPHERDIR. With --masterkey, writes a config "
                                 "that opens with a new\npassword from the master key that 'init' printed (a "
                                 "forgotten password, a lost config).\n\noptions");
    opts.add_options()("help,h", "show this help")("passfile", po::value(&old_src.passfile),
                                                   "read the current password from this file")(
        "extpass", po::value(&old_src.extpass), "run this command for the current password")(
        "new-passfile", po::value(&new_src.passfile), "read the new password from this file")(
        "scrypt-logn", po::value(&scrypt_logn)->default_value(scrypt_logn),
        "with --masterkey, when the config is lost: the new config's scrypt cost, N = 2^logn (10..28)");
    add_config_option(opts, &config_option);
    add_master_key_options(opts, &master_key);
    add_allow_expensive_kdf_option(opts, &allow_expensive_kdf);
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir}})) return kExitOk;
    if (!master_key.file.empty()) master_key.use = true;
    if (master_key.use && (!old_src.passfile.empty() || !old_src.extpass.empty()))
      throw po::error("--masterkey replaces the current password: give no --passfile or --extpass with it");
    if (!master_key.chunk_size.empty() && !master_key.use) throw po::error("--chunk-size is for --masterkey");
    if (scrypt_logn < kMinScryptLogN || scrypt_logn > kMaxScryptLogN)
      throw po::error("--scrypt-logn must be from " + std::to_string(kMinScryptLogN) + " to " + std::to_string(kMaxScryptLogN));
    require_vault_directory(cipherdir, "passwd");
    const ConfigPlace place = config_place(cipherdir, config_option);
    VaultConfig cfg;
    // Each password is a SecretString: wiped when its block ends, or on the way out when
    // unlock (a wrong password), the prompt (the two new ones differ) or rewrap throws.
    SecretBytes master;
    if (master_key.use) {
      master = read_master_key(master_key);
      std::vector<std::string> notes;
      bool found = false;
      cfg = config_for_master_key(cipherdir, place, master, master_key, &notes, &found);
      if (!found) cfg.scrypt.log_n = scrypt_logn;
      else cfg.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // the new wrap runs the config's scrypt
      for (const auto& n : notes) std::cerr << "gpucryptfs passwd: " << n << "\n";
    } else {
      cfg = load_vault_config(place);
      cfg.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
      const SecretString old_pw = read_password(old_src, "Current password: ");
      master = cfg.unlock(old_pw.view(), kdf_policy(allow_expensive_kdf));
    }
    {
      const SecretString new_pw = read_password(new_src, "New password: ", true);
      cfg.rewrap(master, new_pw.view());
    }
    save_vault_config(place, cfg);
    if (master_key.use) {
      std::cout << "Wrote a new config " << place.path() << " that opens with the new password.\n";
      return kExitOk;
    }
    // The master key stays the same (nothing is re-encrypted): docs/SECURITY.md, "Changing the
    // password", says what that does not revoke.
    std::cout << "Password changed.\n"
              << "Note: copies of the old gpucryptfs.conf (backups, sync history) still open this vault with the "
                 "old password; see docs/SECURITY.md.\n";
    return kExitOk;
  });
}

}  // namespace gcfs::cli
