// gpucryptfs volume mount: unlocks a container and serves MOUNTDIR/volume.img until unmounted.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <vector>

#include "crypto/errors.h"
#include "fs/log.h"
#include "fs/volume_container.h"
#include "mount/cli/commands.h"
#include "mount/lifecycle/fuse_runner.h"
#include "mount/cli/password.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/exit_status.h"
#include "mount/lifecycle/mount_lock.h"
#include "mount/daemon/volume_daemon.h"

namespace po = boost::program_options;

namespace gcfs::cli {

int cmd_volume_mount(int argc, char** argv) {
  std::string container, mountdir, engine = "auto", log_file;
  PasswordSource src;
  bool foreground = false, read_only = false, allow_expensive_kdf = false;
  unsigned threads = 16;
  std::string gpus, transport = "auto";
  int gpu_streams = 4;
  po::options_description desc("usage: gpucryptfs volume mount [OPTIONS] CONTAINER MOUNTDIR\n\n"
                               "Mounts the volume in CONTAINER; its plaintext is MOUNTDIR/volume.img.\n\noptions");
  desc.add_options()("help,h", "this help")
      ("passfile", po::value(&src.passfile), "read the password from the first line of this file")
      ("extpass", po::value(&src.extpass), "run this command and read the password from its output")
      ("keyfile", po::value(&src.keyfile), "unlock with this key file (its whole content) instead of a password")
      ("engine", po::value(&engine)->default_value(engine), "cipher engine: auto, cpu or gpu")
      ("foreground,f", po::bool_switch(&foreground), "stay in the foreground, log to stderr")
      ("read-only", po::bool_switch(&read_only), "mount read-only")
      ("log", po::value(&log_file), "append the daemon's log to this file (default when detached: syslog, or ~/.local/state/gpucryptfs/gpucryptfs.log where no syslog daemon listens)")
      ("threads", po::value(&threads)->default_value(threads), "FUSE worker threads (requests served at once)")
      ("gpus", po::value(&gpus)->default_value("all"),
       "GPUs the gpu engine uses, as 'gpucryptfs info' numbers them: all, or a list such as 0,1")
      ("gpu-streams", po::value(&gpu_streams)->default_value(gpu_streams),
       "CUDA streams per GPU: batches in flight at once, each with its own pinned staging")
      ("transport", po::value(&transport)->default_value(transport), mount::kTransportHelp);
  add_allow_expensive_kdf_option(desc, &allow_expensive_kdf);
  if (!parse_command_line(argc, argv, desc, {{"CONTAINER", &container}, {"MOUNTDIR", &mountdir}}))
    return kExitOk;
  require_one_secret_source(src);
  require_engine_name(engine);
  if (threads < 1 || threads > 256) throw po::error("--threads must be from 1 to 256");
  const std::vector<int> gpu_list = parse_gpu_list(gpus);
  if (gpu_streams < 1 || gpu_streams > 64) throw po::error("--gpu-streams must be from 1 to 64");
  const mount::Transport transport_choice = mount::parse_transport(transport);

  // Every path and option value is checked before the password is asked for.
  require_volume_container(container, "mount");
  mount::check_mountpoint(mountdir, kExitBadMountpoint);
  refuse_mounted_volume(std::filesystem::absolute(container).string(), read_only);
  // The header is read here, before the password prompt and the fork: a FIFO, device or
  // directory is refused at once, and so are a damaged header and a scrypt cost above what
  // 'volume create' makes. Nothing is acted on: the daemon opens it again and authenticates it.
  check_kdf_cost(VolumeContainer::read_header(container), kdf_policy(allow_expensive_kdf));
  require_existing_gpus(gpu_list);
  require_usable_gpu_for(engine);
  if (!log_file.empty()) log::to_file(log_file);

  mount::VolumeMountSetup setup;
  setup.container = std::filesystem::absolute(container).string();
  setup.engine.name = engine;
  setup.engine.gpu.devices = gpu_list;
  setup.engine.gpu.streams_per_gpu = gpu_streams;
  setup.read_only = read_only;
  setup.kdf_policy = kdf_policy(allow_expensive_kdf);
  UnlockSecret secret = read_unlock_secret(src, "Password: ");
  setup.password = std::move(secret.text);
  setup.password_kind = secret.kind;

  mount::MountOptions mo;
  // Canonical, as the kernel lists it in /proc/self/mountinfo (where the daemon finds its device).
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(mountdir, ec);
  mo.mountpoint = ec ? std::filesystem::absolute(mountdir).string() : canonical.string();
  mo.foreground = foreground;
  mo.read_only = read_only;
  mo.fsname = setup.container;
  mo.max_threads = threads;
  mo.transport = transport_choice;
  return mount::run_fuse_mount(
      mo,
      [&] {
        // Runs in the daemon: once detached, stderr is gone, so the log goes to syslog or the state file.
        if (log_file.empty() && !foreground) mount::announce_detached_log(log::to_syslog_or_state_file());
        return mount::make_volume_filesystem(setup);
      },
      exit_code_for);
}

}  // namespace gcfs::cli
