// gpucryptfs mount: unlock a directory vault and serve its plaintext view on MOUNTPOINT.
// The password is read here, before detaching; unlocking, the engines and the mount happen in the
// process that serves (see fuse_runner.h for why), and this command returns once the mount works.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "crypto/errors.h"
#include "fs/dir_iv.h"
#include "mount/engine_factory.h"
#include "fs/log.h"
#include "fs/vault.h"
#include "mount/cli_checks.h"
#include "mount/cipherdir_exposure.h"
#include "mount/cli_options.h"
#include "mount/commands.h"
#include "mount/encrypted_fs.h"
#include "mount/exit_status.h"
#include "mount/fuse_runner.h"
#include "mount/password.h"
#include "mount/request_loop.h"
#include "mount/reverse_mount.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

// Everything a running mount owns, in the order it must be torn down.
struct RunningVault {
  std::unique_ptr<Vault> vault;
  std::unique_ptr<EngineSet> engines;
  std::unique_ptr<mount::EncryptedFs> fs;
  ~RunningVault() {
    fs.reset();
    engines.reset();
    vault.reset();
  }
};

std::string absolute(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return path;  // the checks below name the problem
  return buf;
}

// One line, in the log and on the terminal (a detached mount echoes warnings there until it is
// ready; a foreground one logging to a file is told to here).
void warn_if_others_reach(const std::string& cipherdir, bool also_stderr) {
  const std::string why = mount::cipherdir_exposure(cipherdir, ::geteuid());
  if (why.empty()) return;
  const std::string msg = "--allow-other, and other users can reach CIPHERDIR: " + why +
                          ". The daemon gives each user the files and directories they make, in CIPHERDIR too, so "
                          "they could change their part behind its back; keep CIPHERDIR inside a folder only you can "
                          "enter (chmod 700), see docs/SECURITY.md";
  log::warning(msg);
  if (also_stderr) std::cerr << "gpucryptfs: warning: " << msg << "\n";
}

}  // namespace

int cmd_mount(int argc, char** argv) {
  return run_command("mount", [&]() -> int {
    PasswordSource pw_src;
    EngineOptions engine;
    mount::MountOptions mo;
    mount::FsOptions fso;
    std::string cipherdir, log_file;
    bool no_writeback = false, allow_expensive_kdf = false, reverse = false;
    std::string gpus, transport = "auto";
    int gpu_streams = 4;
    po::options_description opts("usage: gpucryptfs mount [OPTIONS] CIPHERDIR MOUNTPOINT\n"
                                 "       gpucryptfs mount --reverse [OPTIONS] PLAINDIR MOUNTPOINT\n\n"
                                 "Mounts the vault in CIPHERDIR on the empty directory MOUNTPOINT and returns once "
                                 "the mount is ready.\nWith --reverse, shows a read-only encrypted view of the "
                                 "plaintext folder PLAINDIR instead\n(see 'gpucryptfs init --reverse').\n"
                                 "Unmount with: fusermount3 -u MOUNTPOINT\n\noptions");
    opts.add_options()("help,h", "show this help")("passfile", po::value(&pw_src.passfile),
                                                   "read the password from the first line of this file")(
        "extpass", po::value(&pw_src.extpass), "run this shell command and read the password from its output")(
        "engine", po::value(&engine.name)->default_value("auto"),
        "cipher engine: cpu, gpu, or auto (the CPU and every usable GPU at once, sharing the work by measured rate)")(
        "foreground,f", po::bool_switch(&mo.foreground), "stay in the foreground and log to stderr")(
        "read-only", po::bool_switch(&mo.read_only), "mount read-only")(
        "reverse", po::bool_switch(&reverse), "show the encrypted view of a plaintext folder (read-only, for backups)")(
        "allow-other", po::bool_switch(&mo.allow_other), "let other users use the mount (needs user_allow_other)")(
        "fuse-options,o", po::value(&mo.extra_options)->composing(), "extra FUSE mount options, comma-separated (may repeat)")(
        "log", po::value(&log_file), "append the log to this file (default when detached: syslog, or ~/.local/state/gpucryptfs/gpucryptfs.log where no syslog daemon listens)")(
        "no-writeback-cache", po::bool_switch(&no_writeback),
        "send every write to gpucryptfs as it happens instead of letting the kernel gather small "
        "writes into pages first (slower for small writes)")(
        "cpu-threads", po::value(&engine.cpu_threads)->default_value(0), "cpu engine threads (0: all cores)")(
        "gpus", po::value(&gpus)->default_value("all"),
        "GPUs the gpu engine uses, as 'gpucryptfs info' numbers them: all, or a list such as 0,1")(
        "gpu-streams", po::value(&gpu_streams)->default_value(gpu_streams),
        "CUDA streams per GPU: batches in flight at once, each with its own pinned staging")(
        "transport", po::value(&transport)->default_value(transport), mount::kTransportHelp);
    add_allow_expensive_kdf_option(opts, &allow_expensive_kdf);
    std::string mountpoint;
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir}, {"MOUNTPOINT", &mountpoint}}))
      return kExitOk;
    require_engine_name(engine.name);
    engine.gpu.devices = parse_gpu_list(gpus);
    if (gpu_streams < 1 || gpu_streams > 64) throw po::error("--gpu-streams must be from 1 to 64");
    engine.gpu.streams_per_gpu = gpu_streams;
    mo.transport = mount::parse_transport(transport);
    fso.writeback_cache = !no_writeback;
    cipherdir = absolute(cipherdir);
    mo.mountpoint = absolute(mountpoint);
    mo.fsname = cipherdir;
    if (!log_file.empty()) log_file = absolute(log_file);

    if (reverse) {
      mo.read_only = true;
      return mount_reverse(cipherdir, mo, engine, pw_src, log_file, allow_expensive_kdf);
    }
    // Every path and option value is checked before the password is asked for.
    require_vault_directory(cipherdir, "mount");
    const VaultConfig config = Vault::load_config(cipherdir);
    config.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
    mount::check_mountpoint(mo.mountpoint, kExitBadMountpoint);
    if (mo.mountpoint == cipherdir || mo.mountpoint.starts_with(cipherdir + "/"))
      throw mount::MountFailure(kExitBadMountpoint, "the mountpoint must not lie inside CIPHERDIR");
    require_existing_gpus(engine.gpu.devices);
    require_usable_gpu_for(engine.name);
    // The parent of a detached mount keeps its copy until it returns: SecretString wipes it on
    // every way out.
    SecretString password = read_password(pw_src, "Password: ");

    auto setup = [&]() -> mount::FuseFilesystem {
      ::umask(0);  // the kernel has applied the caller's umask to every mode we are given
      if (!log_file.empty()) log::to_file(log_file);
      else if (!mo.foreground) mount::announce_detached_log(log::to_syslog_or_state_file());
      if (mo.allow_other) warn_if_others_reach(cipherdir, mo.foreground && !log_file.empty());
      auto rv = std::make_shared<RunningVault>();
      rv->vault = Vault::open(cipherdir, config, password.view(), kdf_policy(allow_expensive_kdf));
      password.clear();
      int root_fd = ::open(cipherdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (root_fd < 0) throw UserError("cannot open " + cipherdir + ": " + std::strerror(errno));
      DirIv iv{};
      if (read_dir_iv(root_fd, &iv, cipherdir) != 0) {
        ::close(root_fd);
        throw CorruptData(cipherdir + "/" + kDirIvFileName + " is missing or damaged: the root's names cannot be read");
      }
      rv->engines = std::make_unique<EngineSet>(engine);
      log::info(rv->engines->description());
      // Before serving: put back chunks that a killed daemon's torn rewrites left failing, and
      // journal this mount's rewrites. A read-only mount writes nothing, the journal included.
      if (!mo.read_only) rv->vault->open_journal(rv->engines->engine());
      rv->fs = std::make_unique<mount::EncryptedFs>(*rv->vault, rv->engines->engine(), root_fd, fso);
      mount::FuseFilesystem f;
      f.ops = &mount::EncryptedFs::operations();
      f.userdata = rv->fs.get();
      f.keep_alive = rv;
      ChunkEngine& engine = rv->engines->engine();
      const ChunkLayout& layout = rv->vault->layout();
      f.allocate_buffer = [&engine](std::size_t n) { return engine.allocate_io_buffer(n); };
      f.on_worker_start = [&engine, &layout] { ContentFile::prepare_thread(engine, layout, mount::max_request_bytes()); };
      return f;
    };
    return mount::run_fuse_mount(mo, setup, exit_code_for);
  });
}

}  // namespace gcfs::cli
