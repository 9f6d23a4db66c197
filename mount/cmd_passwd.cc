// gpucryptfs passwd: wrap the same master key under a new password. File contents and names are
// untouched; only gpucryptfs.conf is rewritten (atomically).
#include <boost/program_options.hpp>
#include <iostream>

#include "crypto/errors.h"
#include "fs/config_file.h"
#include "fs/vault.h"
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
    VaultConfig cfg = Vault::load_config(cipherdir);
    cfg.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
    std::string old_pw = read_password(old_src, "Current password: ");
    SecretBytes master = cfg.unlock(old_pw, kdf_policy(allow_expensive_kdf));
    secure_wipe(old_pw.data(), old_pw.size());
    std::string new_pw = read_password(new_src, "New password: ", true);
    cfg.rewrap(master, new_pw);
    secure_wipe(new_pw.data(), new_pw.size());
    write_config_file(cipherdir, cfg);
    std::cout << "Password changed.\n";
    return kExitOk;
  });
}

}  // namespace gcfs::cli
