// gpucryptfs passwd: wrap the same master key under a new password. File contents and names are
// untouched; only gpucryptfs.conf is rewritten (atomically).
#include <boost/program_options.hpp>
#include <iostream>

#include "crypto/errors.h"
#include "fs/config_file.h"
#include "fs/vault.h"
#include "mount/cli_checks.h"
#include "mount/cli_options.h"
#include "mount/commands.h"
#include "mount/exit_status.h"
#include "mount/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {

int cmd_passwd(int argc, char** argv) {
  return run_command("passwd", [&]() -> int {
    PasswordSource old_src, new_src;
    std::string cipherdir;
    bool allow_expensive_kdf = false;
    po::options_description opts("usage: gpucryptfs passwd [OPTIONS] CIPHERDIR\n\n"
                                 "Changes the password of the vault in CIPHERDIR.\n\noptions");
    opts.add_options()("help,h", "show this help")("passfile", po::value(&old_src.passfile),
                                                   "read the current password from this file")(
        "extpass", po::value(&old_src.extpass), "run this command for the current password")(
        "new-passfile", po::value(&new_src.passfile), "read the new password from this file");
    add_allow_expensive_kdf_option(opts, &allow_expensive_kdf);
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir}})) return kExitOk;
    require_vault_directory(cipherdir, "passwd");
    VaultConfig cfg = Vault::load_config(cipherdir);
    cfg.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
    // Each password is a SecretString: wiped when its block ends, or on the way out when
    // unlock (a wrong password), the prompt (the two new ones differ) or rewrap throws.
    SecretBytes master;
    {
      const SecretString old_pw = read_password(old_src, "Current password: ");
      master = cfg.unlock(old_pw.view(), kdf_policy(allow_expensive_kdf));
    }
    {
      const SecretString new_pw = read_password(new_src, "New password: ", true);
      cfg.rewrap(master, new_pw.view());
    }
    write_config_file(cipherdir, cfg);
    // The master key stays the same (nothing is re-encrypted): docs/SECURITY.md, "Changing the
    // password", says what that does not revoke.
    std::cout << "Password changed.\n"
              << "Note: copies of the old gpucryptfs.conf (backups, sync history) still open this vault with the "
                 "old password; see docs/SECURITY.md.\n";
    return kExitOk;
  });
}

}  // namespace gcfs::cli
