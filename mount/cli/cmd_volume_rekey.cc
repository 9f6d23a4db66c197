// gpucryptfs volume rekey: a new master key for a volume container, in place (fs/volume_rekey.h).
// Every key slot that stays must be given its secret, since a slot wraps the master key under a
// key only its secret derives (cryptsetup reencrypt asks for every keyslot's passphrase too).
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "crypto/errors.h"
#include "fs/log.h"
#include "fs/volume_container.h"
#include "fs/volume_rekey.h"
#include "mount/cli/byte_size.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/master_key_option.h"
#include "mount/cli/password.h"
#include "mount/cli/rekey_options.h"
#include "mount/cli/rekey_progress.h"
#include "mount/engines/engine_factory.h"

namespace po = boost::program_options;

namespace gcfs::cli {

int volume_rekey(int argc, char** argv) {
  std::string container, engine = "auto";
  PasswordSource unlock;
  RekeySlotArgs slots;
  bool allow_expensive_kdf = false, quiet = false;
  po::options_description desc(
      "usage: gpucryptfs volume rekey [UNLOCK] [--slot-passfile N=F]... [--slot-keyfile N=F]... [--drop-slot N]...\n"
      "                               [--keep-only-unlocking-slot] [--engine auto|cpu|gpu] CONTAINER\n\n"
      "Moves the volume in CONTAINER to a new master key, in place: every chunk is re-encrypted and every key\n"
      "slot that stays is wrapped again, so the old master key and every old copy of the header open nothing\n"
      "afterwards. The slot that UNLOCK opens stays; every other slot needs its secret (asked for on a\n"
      "terminal, or --slot-passfile/--slot-keyfile), or is removed (--drop-slot N, --keep-only-unlocking-slot).\n"
      "Stopped at any point (a kill, a power cut), run it again: it goes on where it stopped, and until it\n"
      "has finished nothing else opens the volume. The volume must not be mounted.\n\noptions");
  desc.add_options()("help,h", "this help")
      ("passfile", po::value(&unlock.passfile), "unlock with the first line of this file")
      ("extpass", po::value(&unlock.extpass), "unlock with the first line of this command's output")
      ("keyfile", po::value(&unlock.keyfile), "unlock with this key file (its whole content)")
      ("engine", po::value(&engine)->default_value(engine), "cipher engine: auto, cpu or gpu")
      ("quiet,q", po::bool_switch(&quiet), "no progress and no master key printed");
  add_rekey_slot_options(desc, &slots);
  add_allow_expensive_kdf_option(desc, &allow_expensive_kdf);
  if (!parse_command_line(argc, argv, desc, {{"CONTAINER", &container}})) return kExitOk;
  require_one_secret_source(unlock);
  require_engine_name(engine);
  require_volume_container(container, "rekey");
  if (const std::string mp = find_mountpoint_of(container); !mp.empty())
    throw UserError(container + " is mounted on " + mp + ": unmount it first ('fusermount3 -u " + mp + "')");
  VolumeContainer vol(container, true, true);  // exclusive lock; a re-key in progress is ours to finish
  const KdfPolicy policy = kdf_policy(allow_expensive_kdf);
  vol.check_kdf_cost(policy);
  require_usable_gpu_for(engine);
  SecretBytes master;
  UnlockSecret secret = read_unlock_secret(unlock, "Password: ");
  master = vol.unlock(secret.text.view(), policy, secret.kind);
  log::info("volume rekey: " + container + " unlocked by " +
            (vol.opened_slot() < 0 ? std::string("its password") : "key slot " + std::to_string(vol.opened_slot())));
  const VaultConfig opened = vol.config();
  const int opened_slot = vol.opened_slot();
  // Asked for only when a re-key starts (one under way holds its new header already), before
  // anything is written: the other slots' secrets, each checked against its slot.
  auto make_plan = [&] {
    const KeptSlotSecrets kept = gather_kept_slot_secrets(slots, opened, opened_slot, secret, ::isatty(STDIN_FILENO) == 1);
    return make_rekey_plan(opened, master, kept.kept());
  };
  EngineOptions eo;
  eo.name = engine;
  EngineSet engines(eo);
  RekeyProgress progress(!quiet && ::isatty(STDERR_FILENO) == 1);
  progress.set_totals(vol.config().volume_size, 0);
  std::uint64_t reported = 0;
  // Tests only: SIGKILL after this many segments, so a test can stop a re-key dead at a known point
  // (writes of the segment before may still be in flight), on any machine's speed.
  const char* kill_env = std::getenv("GPUCRYPTFS_TEST_REKEY_KILL_AFTER");
  int segments_left = kill_env ? std::atoi(kill_env) : 0;
  const VolumeRekeyResult r =
      rekey_volume(vol, master, make_plan, engines.engine(), [&](std::uint64_t done, std::uint64_t) {
        if (segments_left > 0 && --segments_left == 0) ::raise(SIGKILL);
        progress.add(done - reported, 0);
        reported = done;
      });
  progress.add_times(r.stats.read_s, r.stats.cipher_s, r.stats.write_s);
  (void)progress.finish();
  const StreamRekeyStats& s = r.stats;
  const std::string summary = "volume rekey: " + container + " is under a new master key (" +
                              format_byte_size(r.volume_bytes) + ", " + std::to_string(s.resealed) +
                              " chunks re-encrypted, " + std::to_string(s.holes) + " holes" +
                              (r.resumed ? ", finishing a re-key begun before" : "") + "); time busy: read " +
                              seconds_text(s.read_s) + ", cipher " + seconds_text(s.cipher_s) + " (" +
                              engines.description() + "), write " + seconds_text(s.write_s) + " of which sync " +
                              seconds_text(s.sync_s);
  log::info(summary);
  if (!quiet) {
    std::cout << summary << ".\n";
    if (!s.damaged.empty())
      std::cout << "warning: " << s.damaged.size()
                << " chunks were damaged before the re-key and stay unreadable (the log names them).\n";
    print_master_key(std::cout, r.new_master);
    std::cout << "The old master key and every copy of the old header open nothing of this volume now; copies of\n"
                 "the old container (backups, snapshots) still open with the old key and old passwords.\n";
  }
  return s.damaged.empty() ? kExitOk : kExitFsckProblems;
}

}  // namespace gcfs::cli
