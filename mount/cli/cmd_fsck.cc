// gpucryptfs fsck: check every directory IV, name, long-name file, file header, chunk tag,
// symlink target and extended attribute of a directory vault, list each problem with its
// ciphertext path (and its plaintext path where the names decrypt), and exit 0 only when the
// vault is clean. --repair moves items that cannot be read at all into
// CIPHERDIR/gpucryptfs.lost+found and restores torn chunks from the crash journal (only chunks
// that fail authentication, from pre-images that pass it); nothing is ever deleted. A
// lost+found (or index) that is not a real directory (regular file) of CIPHERDIR is reported and
// makes --repair move nothing.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "crypto/errors.h"
#include "mount/engines/engine_factory.h"
#include "fs/rekey/rekey_record_file.h"
#include "fs/vault.h"
#include "fs/fsck/vault_check.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/config_option.h"
#include "mount/cli/exit_status.h"
#include "mount/lifecycle/mount_lock.h"
#include "mount/cli/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

// A bar redrawn in place on a terminal; on anything else one line per tenth, so logs stay short.
class ProgressBar {
 public:
  ProgressBar() : tty_(::isatty(STDERR_FILENO) == 1) {}
  void update(const FsckProgress& p) {
    const double frac = p.total_bytes ? static_cast<double>(p.done_bytes) / static_cast<double>(p.total_bytes)
                        : p.total_entries ? static_cast<double>(p.done_entries) / static_cast<double>(p.total_entries)
                                          : 1.0;
    const int pct = static_cast<int>(std::min(1.0, frac) * 100);
    if (tty_) {
      const auto now = std::chrono::steady_clock::now();
      if (pct != 100 && now - last_ < std::chrono::milliseconds(100)) return;
      last_ = now;
      const int width = 30, fill = pct * width / 100;
      std::fprintf(stderr, "\rfsck [%.*s%*s] %3d%%  %llu/%llu entries, %llu/%llu MiB", fill,
                   "##############################", width - fill, "", pct,
                   static_cast<unsigned long long>(p.done_entries), static_cast<unsigned long long>(p.total_entries),
                   static_cast<unsigned long long>(p.done_bytes >> 20), static_cast<unsigned long long>(p.total_bytes >> 20));
      drawn_ = true;
    } else if (pct / 10 > last_tenth_) {
      last_tenth_ = pct / 10;
      std::fprintf(stderr, "fsck: %d%% (%llu of %llu entries)\n", pct, static_cast<unsigned long long>(p.done_entries),
                   static_cast<unsigned long long>(p.total_entries));
    }
  }
  void finish() {
    if (drawn_) std::fputc('\n', stderr);
  }

 private:
  bool tty_;
  bool drawn_ = false;
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

int cmd_fsck(int argc, char** argv) {
  return run_command("fsck", [&] {
    PasswordSource pw_src;
    std::string cipherdir, engine = "auto", config_option;
    bool repair = false, force = false, allow_expensive_kdf = false;
    po::options_description opts(
        "usage: gpucryptfs fsck [OPTIONS] CIPHERDIR\n\n"
        "Reads every header, chunk, name, long-name file, symlink and extended attribute of the\n"
        "vault in CIPHERDIR and lists what fails authentication. Exit status 0: clean; 26: problems\n"
        "found. A mounted vault is refused (unmount it first, or see --force).\n\noptions");
    opts.add_options()("help,h", "show this help")(
        "passfile", po::value(&pw_src.passfile), "read the password from the first line of this file")(
        "extpass", po::value(&pw_src.extpass), "run this command and read the password from its output")(
        "engine", po::value(&engine)->default_value(engine), "cipher engine: auto, cpu or gpu")(
        "repair", po::bool_switch(&repair),
        "move items that cannot be read at all (names that do not decrypt, damaged headers, files none "
        "of whose chunks read) into CIPHERDIR/gpucryptfs.lost+found, and put back chunks torn by a "
        "killed daemon from the crash journal; nothing is deleted; never while the vault is mounted")(
        "force", po::bool_switch(&force),
        "check a vault that is mounted: files its daemon is writing may show as damaged; never with --repair");
    add_keyfile_option(opts, &pw_src.keyfile);
    add_config_option(opts, &config_option);
    add_allow_expensive_kdf_option(opts, &allow_expensive_kdf);
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir}})) return static_cast<int>(kExitOk);
    require_one_secret_source(pw_src);
    while (cipherdir.size() > 1 && cipherdir.back() == '/') cipherdir.pop_back();

    // Every path and option value is checked before the password is asked for.
    require_engine_name(engine);
    require_vault_directory(cipherdir, "fsck");
    refuse_during_rekey(cipherdir, "fsck");
    VaultConfig cfg = load_vault_config(config_place(cipherdir, config_option));
    cfg.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
    require_usable_gpu_for(engine);
    // A live daemon rewrites chunks and moves entries under fsck's feet: reports about them would
    // be noise, and --repair could move or restore what the daemon has just written.
    if (const std::string mp = find_mountpoint_of(cipherdir); !mp.empty()) {
      const std::string unmount = "unmount it first ('fusermount3 -u " + mp + "')";
      if (repair) throw UserError(cipherdir + " is mounted on " + mp + ": --repair would race its daemon; " + unmount);
      if (!force)
        throw UserError(cipherdir + " is mounted on " + mp + ": " + unmount +
                        ", or give --force to check it anyway (files being written may show as damaged)");
      std::cerr << "fsck: " << cipherdir << " is mounted on " << mp
                << "; checking anyway (--force): files being written may show as damaged\n";
    }
    // A mount that this machine does not list (another mount namespace, another host over a
    // share) still holds the vault's lock: --repair takes that lock and keeps it to the end, so
    // it never moves or restores what a daemon is writing, and no mount starts meanwhile; a check
    // alone goes on, saying what it may see.
    UniqueFd repair_lock;
    if (repair) {
      repair_lock = take_vault_write_lock(cipherdir, "fsck --repair", false);
    } else if (vault_write_lock_holder(cipherdir, std::chrono::milliseconds(0)).held && !force) {
      std::cerr << "fsck: " << cipherdir << " is in use by a gpucryptfs process that holds its crash journal (a "
                << "mount this machine does not list?); checking anyway, without changing anything: files being "
                   "written may show as damaged\n";
    }
    std::unique_ptr<Vault> vault;
    {
      const UnlockSecret secret = read_unlock_secret(pw_src, "Password: ");
      vault = Vault::open(cipherdir, cfg, secret.text.view(), kdf_policy(allow_expensive_kdf), secret.kind);
    }  // the password is wiped here, or on the way out when open throws
    if (repair && !repair_lock) repair_lock = take_vault_write_lock(cipherdir, "fsck --repair", true);

    EngineOptions eo;
    eo.name = engine;
    EngineSet engines(eo);
    ProgressBar bar;
    FsckOptions fo;
    fo.repair = repair;
    fo.journal_lock_fd = repair_lock.get();
    fo.progress = [&](const FsckProgress& p) { bar.update(p); };
    FsckReport rep = check_vault(*vault, engines.engine(), fo);
    bar.finish();

    for (const auto& line : rep.restored) std::cout << line << "\n";
    std::size_t unreadable = 0, moved = 0;
    for (const auto& p : rep.problems) {
      std::cout << "problem: " << p.what << "\n"
                << "  ciphertext: " << cipherdir << "/" << p.cipher_path << "\n"
                << "  plaintext:  " << (p.plain_path.empty() ? "(unknown: a name on the way does not decrypt)" : p.plain_path)
                << "\n";
      if (!p.moved_to.empty()) {
        std::cout << "  moved to:   " << cipherdir << "/" << p.moved_to << "\n";
        ++moved;
      }
      if (p.unreadable) ++unreadable;
    }
    std::cout << "fsck: checked " << rep.directories << " directories, " << rep.files << " files, " << rep.symlinks
              << " symlinks, " << rep.chunks << " chunks (" << rep.holes << " holes), " << rep.xattrs
              << " extended attributes: ";
    if (rep.clean()) {
      std::cout << "no problems.\n";
      return static_cast<int>(kExitOk);
    }
    std::cout << rep.problems.size() << (rep.problems.size() == 1 ? " problem" : " problems") << ".\n";
    if (repair && !rep.repair_refused.empty())
      std::cout << "fsck: --repair moved nothing, because " << rep.repair_refused
                << "; remove or rename it, then run the repair again.\n";
    else if (repair && moved)
      std::cout << "fsck: moved " << moved << " unreadable item(s) into " << cipherdir << "/" << kLostFoundDirName
                << " (listed in its " << kLostFoundIndexName << "); nothing was deleted.\n";
    else if (!repair && unreadable)
      std::cout << "fsck: " << unreadable << " item(s) cannot be read at all; 'gpucryptfs fsck --repair' moves them into "
                << cipherdir << "/" << kLostFoundDirName << " (nothing is deleted). Files with some damaged chunks stay"
                << " in place: copy out what reads, e.g. with 'dd conv=noerror'.\n";
    return static_cast<int>(kExitFsckProblems);
  });
}

}  // namespace gcfs::cli
