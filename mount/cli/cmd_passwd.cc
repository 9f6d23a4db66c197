// gpucryptfs passwd: wrap the same master key under a new password. File contents and names are
// untouched; only gpucryptfs.conf is rewritten (atomically).
#include <boost/program_options.hpp>
#include <iostream>
#include <vector>

#include "crypto/errors.h"
#include "fs/rekey/rekey_record_file.h"
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
        "keyfile", po::value(&old_src.keyfile), "unlock with this key file instead of the current password")(
        "new-passfile", po::value(&new_src.passfile), "read the new password from this file")(
        "new-keyfile", po::value(&new_src.keyfile),
        "make the key slot that opened a key file slot: this file's whole content (any bytes, up to 8 MiB)")(
        "scrypt-logn", po::value(&scrypt_logn)->default_value(scrypt_logn),
        "with --masterkey, when the config is lost: the new config's scrypt cost, N = 2^logn (10..28)");
    add_config_option(opts, &config_option);
    add_master_key_options(opts, &master_key);
    add_allow_expensive_kdf_option(opts, &allow_expensive_kdf);
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir}})) return kExitOk;
    if (!master_key.file.empty()) master_key.use = true;
    require_one_secret_source(old_src);
    require_new_secret_source(new_src);
    if (master_key.use && old_src.given())
      throw po::error("--masterkey replaces the current password: give no --passfile, --extpass or --keyfile with it");
    if (!master_key.chunk_size.empty() && !master_key.use) throw po::error("--chunk-size is for --masterkey");
    if (scrypt_logn < kMinScryptLogN || scrypt_logn > kMaxScryptLogN)
      throw po::error("--scrypt-logn must be from " + std::to_string(kMinScryptLogN) + " to " + std::to_string(kMaxScryptLogN));
    require_vault_directory(cipherdir, "passwd");
    refuse_during_rekey(cipherdir, "passwd");
    const ConfigPlace place = config_place(cipherdir, config_option);
    VaultConfig cfg;
    // Each password is a SecretString: wiped when its block ends, or on the way out when
    // unlock (a wrong password), the prompt (the two new ones differ) or rewrap throws.
    SecretBytes master;
    int opened_slot = -1;
    if (master_key.use) {
      master = read_master_key(master_key);
      std::vector<std::string> notes;
      bool found = false;
      cfg = config_for_master_key(cipherdir, place, master, master_key, &notes, &found);
      if (!found) cfg.scrypt.log_n = scrypt_logn;
      else cfg.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // the new wrap runs the config's scrypt
      for (const auto& n : notes) std::cerr << "gpucryptfs passwd: " << n << "\n";
      if (cfg.slots.size() > 1)
        throw UserError(place.path() + " has " + std::to_string(cfg.slots.size()) +
                        " key slots, and the master key does not say which one to change: add a slot with "
                        "'gpucryptfs keyslot add --masterkey', then remove the one forgotten with 'keyslot remove'");
      if (cfg.slots.size() == 1) opened_slot = cfg.slots.front().number;
    } else {
      cfg = load_vault_config(place);
      cfg.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
      const UnlockSecret old_pw = read_unlock_secret(old_src, "Current password: ");
      master = cfg.unlock(old_pw.text.view(), kdf_policy(allow_expensive_kdf), old_pw.kind, &opened_slot);
    }
    if (!new_src.keyfile.empty() && !cfg.has_key_slots())
      throw UserError(place.path() + " is a config of version 1 (one password, no key slots): a key file needs key "
                      "slots; 'gpucryptfs keyslot add --new-keyfile' upgrades it and adds one");
    {
      const UnlockSecret new_pw = read_unlock_secret(new_src, "New password: ", true);
      if (!cfg.has_key_slots()) cfg.rewrap(master, new_pw.text.view());
      else if (opened_slot >= 0) cfg.rewrap_slot(opened_slot, master, new_pw.text.view(), new_pw.kind);
      else opened_slot = cfg.add_slot(master, new_pw.text.view(), new_pw.kind, cfg.scrypt);  // a config without slots
    }
    save_vault_config(place, cfg);
    if (master_key.use) {
      std::cout << "Wrote a new config " << place.path() << " that opens with the new password.\n";
      return kExitOk;
    }
    // The master key stays the same (nothing is re-encrypted): docs/SECURITY.md, "Changing the
    // password", says what that does not revoke.
    if (cfg.has_key_slots()) std::cout << "Key slot " << opened_slot << " changed.\n";
    else std::cout << "Password changed.\n";
    std::cout
              << "Note: copies of the old gpucryptfs.conf (backups, sync history) still open this vault with the "
                 "old password; see docs/SECURITY.md.\n";
    return kExitOk;
  });
}

}  // namespace gcfs::cli
