// gpucryptfs rekey: a new master key for a directory vault, offline. Every chunk, name, long
// name, symlink target and extended attribute is re-encrypted under it (fs/rekey/dir_rekey.h),
// every kept key slot re-wrapped (crypto/rekey_plan.h), and the new master key printed once as
// `init` prints it. Killed at any moment, running it again finishes: the record it writes first
// (fs/rekey/rekey_record_file.h) holds the new config and key, opened by the old master key, so a
// resume needs one unlock and no other slot's secret.
#include <algorithm>
#include <fcntl.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <memory>
#include <thread>

#include "crypto/errors.h"
#include "crypto/rekey_plan.h"
#include "fs/log.h"
#include "fs/rekey/dir_rekey.h"
#include "fs/rekey/rekey_record_file.h"
#include "fs/rekey/timed_engine.h"
#include "fs/vault.h"
#include "mount/cli/byte_size.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/config_option.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/master_key_option.h"
#include "mount/cli/password.h"
#include "mount/cli/rekey_options.h"
#include "mount/cli/rekey_progress.h"
#include "mount/engines/engine_factory.h"
#include "mount/lifecycle/mount_lock.h"

namespace po = boost::program_options;

namespace gcfs::cli {

// --engine auto below this much data uses the cpu engine alone (see where it is used).
constexpr std::uint64_t kRekeyAutoGpuMinBytes = std::uint64_t{8} << 30;
namespace {

struct RekeyArgs {
  PasswordSource unlock;
  RekeySlotArgs slots;
  std::string cipherdir, config_option;
  EngineOptions engine;
  bool allow_expensive_kdf = false, quiet = false, progress = false;
  int jobs = 0;  // directories at once; 0: half the cores
};

// The new config and key: from the record of a re-key that was cut short, or made now.
struct Target {
  VaultConfig config;
  SecretBytes master;
  bool resumed = false;
  std::vector<int> dropped;
};

bool same_config(const VaultConfig& a, const std::string& json) {
  try {
    return VaultConfig::from_json(json).to_json() == a.to_json();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int cmd_rekey(int argc, char** argv) {
  return run_command("rekey", [&]() -> int {
    RekeyArgs a;
    po::options_description opts(
        "usage: gpucryptfs rekey [OPTIONS] CIPHERDIR\n\n"
        "Re-encrypts the vault in CIPHERDIR (unmounted) under a new master key and prints the new key once.\n"
        "Every key slot kept is re-wrapped, which needs its secret: give each with --slot-passfile or\n"
        "--slot-keyfile, answer the prompts, or drop slots. If it is interrupted, run it again: it finishes.\n\n"
        "options");
    opts.add_options()("help,h", "show this help")("passfile", po::value(&a.unlock.passfile),
                                                   "unlock with the password in the first line of this file")(
        "extpass", po::value(&a.unlock.extpass), "unlock with the password this command prints")(
        "keyfile", po::value(&a.unlock.keyfile), "unlock with this key file (its whole content)")(
        "engine", po::value(&a.engine.name)->default_value("auto"), "cipher engine: cpu, gpu or auto (as mount's)")(
        "cpu-threads", po::value(&a.engine.cpu_threads)->default_value(0), "cpu engine threads (0: all cores)")(
        "jobs", po::value(&a.jobs)->default_value(0), "directories re-keyed at once (0: half the cores, at least 1)")(
        "progress", po::bool_switch(&a.progress), "show progress and the read/cipher/write summary even off a terminal")(
        "quiet,q", po::bool_switch(&a.quiet), "print nothing on success: not even the new master key");
    add_rekey_slot_options(opts, &a.slots);
    add_config_option(opts, &a.config_option);
    add_allow_expensive_kdf_option(opts, &a.allow_expensive_kdf);
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &a.cipherdir}})) return kExitOk;
    require_one_secret_source(a.unlock);
    require_engine_name(a.engine.name);
    require_vault_directory(a.cipherdir, "rekey");
    require_usable_gpu_for(a.engine.name);
    const ConfigPlace place = config_place(a.cipherdir, a.config_option);
    const VaultConfig cfg = load_vault_config(place);
    if (cfg.kind != VaultKind::Directory) throw UserError(place.path() + " is not a directory vault's config");
    cfg.check_kdf_cost(kdf_policy(a.allow_expensive_kdf));
    refuse_second_read_write_mount(a.cipherdir);  // before any password is asked for
    UniqueFd root(::open(a.cipherdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root) throw UserError("cannot open " + a.cipherdir);

    int opened_slot = -1;
    UnlockSecret secret = read_unlock_secret(a.unlock, "Password: ");
    const SecretBytes master = cfg.unlock(secret.text.view(), kdf_policy(a.allow_expensive_kdf), secret.kind, &opened_slot);

    Target t;
    std::string why_not;
    std::optional<LoadedRekeyRecord> rec;
    try {
      rec = load_rekey_record(root.get(), master, &why_not);
    } catch (const CorruptData& e) {
      // The config in place may be the new one already: a re-key killed after writing it and
      // before removing its record. Then there is nothing left but the record to remove.
      const auto peek = peek_rekey_record_config(root.get());
      if (!peek || !same_config(cfg, *peek))
        throw CorruptData(std::string(e.what()) +
                          "; refused, nothing was changed. Keep CIPHERDIR as it is: a damaged record cannot be "
                          "resumed from, and the data re-keyed so far opens only with the key it holds");
      remove_rekey_record(root.get());
      if (!a.quiet) {
        std::cout << "The re-key had finished; its record is removed now. The vault's master key is:\n";
        print_master_key(std::cout, master);
      }
      return kExitOk;
    }
    if (rec) {
      if (!rec->note.empty()) log::warning("rekey: one copy of the record was passed over: " + rec->note);
      t.config = VaultConfig::from_json(rec->record.new_config_json);
      t.master = std::move(rec->new_master);
      t.resumed = true;
      const RekeySlotArgs& sa = a.slots;
      if (!sa.slot_passfiles.empty() || !sa.slot_keyfiles.empty() || !sa.drop_slots.empty() || sa.keep_only_unlocking_slot)
        std::cerr << "gpucryptfs rekey: finishing the re-key that was interrupted, with the key slots chosen when it "
                     "began; the slot options given now are not used\n";
      if (!t.config.master_key_matches(t.master)) throw CorruptData("the re-key record's config does not match its key");
    } else {
      const bool interactive = ::isatty(STDIN_FILENO) && a.unlock.passfile.empty() && a.unlock.extpass.empty();
      KeptSlotSecrets kept = gather_kept_slot_secrets(a.slots, cfg, opened_slot, secret, interactive);
      RekeyPlan plan = make_rekey_plan(cfg, master, kept.kept());
      t.config = std::move(plan.new_config);
      t.master = std::move(plan.new_master);
      t.dropped = kept.dropped;
    }

    const auto old_v = Vault::open_with_master_key(a.cipherdir, cfg, master);
    const auto new_v = Vault::open_with_master_key(a.cipherdir, t.config, t.master);
    // The journal's recovery and the first pass need no bulk cipher: the cpu engine. The engine
    // asked for is built once the first pass has measured the work.
    EngineOptions cpu_only = a.engine;
    cpu_only.name = "cpu";
    EngineSet cpu_engines(cpu_only);
    TimedEngine timed(cpu_engines.engine());
    // The vault's write lock (as a read-write mount holds it) for the whole re-key, and any torn
    // chunk a killed daemon left restored under the old key first.
    old_v->open_journal(cpu_engines.engine());
    if (!old_v->journal())
      throw UserError("rekey needs the vault's lock, its crash journal " + old_v->journal_path() +
                      ", and cannot have it (see the warning above)");
    if (!t.resumed) write_rekey_record(root.get(), RekeyRecord::make(master, t.master, t.config.to_json()));

    const bool show = !a.quiet && (a.progress || ::isatty(STDERR_FILENO));
    RekeyProgress progress(show);
    DirRekeyHooks hooks;
    hooks.progress = [&](std::uint64_t b, std::uint64_t f) { progress.add(b, f); };
    hooks.times = [&](const CopyTimes& c) { progress.add_times(c.read_s, 0, c.write_s); };
    // A small file's copy is mostly system calls, each core's own: as many copiers as cores (at
    // least 4 per directory, so that one waiting on the disk does not idle a small machine), over
    // a directory per two cores at once (one walker below 4 cores, where the copiers fill them).
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    if (a.jobs < 0 || a.jobs > 256) throw po::error("--jobs must be from 0 to 256, got " + std::to_string(a.jobs));
    hooks.walkers = a.jobs > 0 ? a.jobs : cores >= 4 ? cores / 2 : 1;
    hooks.threads = std::max(4, cores / hooks.walkers);
    // A large file alone in its batch: a range per four cores (two on a small machine), each one
    // reading ahead while it writes.
    hooks.file_parts = std::clamp(cores / 4, 2, 8);
    DirRekey walk(root.get(), RekeyPair{*old_v, *new_v, timed}, hooks);
    const RekeyTotals totals = walk.scan();
    progress.set_totals(totals.bytes, totals.files);
    std::unique_ptr<EngineSet> engines;
    if (a.engine.name == "auto" && totals.bytes < kRekeyAutoGpuMinBytes) {
      // Measured on the H200 machine: starting the GPU engine costs about a second, and 16 cores
      // seal and open at 10 GB/s and more, so the GPU pays off only on many gigabytes.
      log::info("rekey: " + format_byte_size(totals.bytes) + " to re-key, less than the " +
                format_byte_size(kRekeyAutoGpuMinBytes) + " on which starting a GPU pays off: the cpu engine");
    } else if (a.engine.name != "cpu") {
      engines = std::make_unique<EngineSet>(a.engine);
      timed.set_inner(engines->engine());
      log::info("rekey: " + engines->description());
    }
    const DirRekeyStats stats = walk.run();
    progress.add_times(0, timed.seconds(), 0);
    // Everything re-keyed is durable before the config that needs it replaces the old one.
    if (::syncfs(root.get()) != 0) throw UserError("cannot sync " + a.cipherdir);
    save_vault_config(place, t.config);
    remove_rekey_record(root.get());
    old_v->close_journal();
    const std::string summary = progress.finish();
    log::info("rekey: " + summary);
    if (show) std::cerr << "gpucryptfs rekey: " << summary << "\n";
    if (stats.foreign)
      std::cerr << "gpucryptfs rekey: " << stats.foreign
                << " entries are under neither key and were left as they are: 'gpucryptfs fsck' reports them\n";
    if (a.quiet) return kExitOk;
    std::cout << (t.resumed ? "Re-key finished" : "Re-keyed") << ": " << stats.files << " files, " << stats.directories
              << " directories, " << stats.symlinks << " symlinks under a new master key; key slots kept:";
    for (const KeySlot& s : t.config.slots) std::cout << " " << s.number;
    if (!t.dropped.empty()) {
      std::cout << "; dropped:";
      for (int n : t.dropped) std::cout << " " << n;
    }
    std::cout << ".\nThe old master key and every old copy of the config open nothing any more; backups of the old "
                 "ciphertext stay readable with them (docs/SECURITY.md).\n";
    print_master_key(std::cout, t.master);
    return kExitOk;
  });
}

}  // namespace gcfs::cli
