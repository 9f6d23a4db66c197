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
#include "mount/engines/engine_factory.h"
#include "fs/log.h"
#include "fs/vault.h"
#include "mount/cli/cli_checks.h"
#include "mount/daemon/caller_charge.h"
#include "mount/daemon/cipherdir_exposure.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/config_option.h"
#include "mount/daemon/encrypted_fs.h"
#include "mount/cli/exit_status.h"
#include "mount/lifecycle/fuse_runner.h"
#include "mount/daemon/idle_timer.h"
#include "mount/cli/master_key_option.h"
#include "mount/lifecycle/mount_lock.h"
#include "mount/cli/password.h"
#include "mount/transport/request_loop.h"
#include "mount/cli/reverse_mount.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

// Everything a running mount owns, in the order it must be torn down.
struct RunningVault {
  std::unique_ptr<Vault> vault;
  std::unique_ptr<EngineSet> engines;
  std::unique_ptr<mount::EncryptedFs> fs;
  std::unique_ptr<mount::IdleWatch> idle;  // first to go: it may unmount
  // Once no request runs any more: the write lock goes at once, before the transport's buffers,
  // the open files and the engines are torn down (GPU contexts and page-locked memory take
  // seconds), so that a script that unmounts and mounts again at once finds the vault free. The
  // open files still point at the journal, but nothing writes through them from here on: their
  // teardown only closes descriptors and sets mtimes.
  void served() {
    if (vault) vault->close_journal();
    if (const std::string use = engines ? engines->usage() : std::string(); !use.empty()) log::info("engine use: " + use);
  }
  ~RunningVault() {
    idle.reset();
    fs.reset();
    if (vault) vault->close_journal();
    engines.reset();
    vault.reset();
  }
};

std::string absolute(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return path;  // the checks below name the problem
  return buf;
}

// The log file's path made absolute (the daemon leaves its working directory) with its folder
// resolved and its own name kept: a symlink there is the log's to refuse (fs/log.h), not ours to
// follow.
std::string absolute_file(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return absolute(path);
  const std::string d = absolute(dir);
  return (d == "/" ? "" : d) + "/" + name;
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
    std::string cipherdir, log_file, config_option, idle_text;
    bool no_writeback = false, writeback = false, allow_expensive_kdf = false, reverse = false, nonempty = false;
    MasterKeyOptions master_key;
    std::string gpus, backing_io = "auto", transport = "auto";
    int gpu_streams = 4;
    po::options_description opts("usage: gpucryptfs mount [OPTIONS] CIPHERDIR MOUNTPOINT\n"
                                 "       gpucryptfs mount --reverse [OPTIONS] PLAINDIR MOUNTPOINT\n\n"
                                 "Mounts the vault in CIPHERDIR on the empty directory MOUNTPOINT and returns once "
                                 "the mount is ready.\nOne read-write mount per vault: a second is refused (exit "
                                 "status 31); --read-only ones may join it.\nWith --reverse, shows a read-only encrypted view of the "
                                 "plaintext folder PLAINDIR instead\n(see 'gpucryptfs init --reverse').\n"
                                 "Unmount with: fusermount3 -u MOUNTPOINT\n\noptions");
    opts.add_options()("help,h", "show this help")("passfile", po::value(&pw_src.passfile),
                                                   "read the password from the first line of this file")(
        "extpass", po::value(&pw_src.extpass), "run this shell command and read the password from its output")(
        "engine", po::value(&engine.name)->default_value("auto"),
        "cipher engine: cpu, gpu, or auto (the CPU and every usable GPU at once, sharing the work by measured rate)")(
        "foreground,f", po::bool_switch(&mo.foreground), "stay in the foreground and log to stderr")(
        "read-only", po::bool_switch(&mo.read_only),
        "mount read-only (allowed beside the vault's read-write mount, whose changes it shows)")(
        "nonempty", po::bool_switch(&nonempty), "mount even when MOUNTPOINT is not empty (what it holds is hidden while mounted)")(
        "idle", po::value(&idle_text),
        "unmount after this long unused (no request and no open file): 90s, 15m, 2h (default: never)")(
        "reverse", po::bool_switch(&reverse), "show the encrypted view of a plaintext folder (read-only, for backups)")(
        "allow-other", po::bool_switch(&mo.allow_other), "let other users use the mount (needs user_allow_other)")(
        "fuse-options,o", po::value(&mo.extra_options)->composing(), "extra FUSE mount options, comma-separated (may repeat)")(
        "log", po::value(&log_file), "append the log to this file (default when detached: syslog, or ~/.local/state/gpucryptfs/gpucryptfs.log where no syslog daemon listens)")(
        "writeback-cache", po::bool_switch(&writeback),
        "let the kernel gather writes into pages and send them later from its writeback worker: faster "
        "for one writer of small pieces, slower for several writers at once (default: every write is "
        "sent as it happens)")(
        "no-writeback-cache", po::bool_switch(&no_writeback), "the default; kept for scripts that name it")(
        "cpu-threads", po::value(&engine.cpu_threads)->default_value(0), "cpu engine threads (0: all cores)")(
        "gpus", po::value(&gpus)->default_value("all"),
        "GPUs the gpu engine uses, as 'gpucryptfs info' numbers them: all, or a list such as 0,1")(
        "gpu-streams", po::value(&gpu_streams)->default_value(gpu_streams),
        "CUDA streams per GPU: batches in flight at once, each with its own pinned staging")(
        "backing-io", po::value(&backing_io)->default_value(backing_io),
        "how a format 2 vault's chunk data meets CIPHERDIR: direct (O_DIRECT, no page-cache copy), buffered, "
        "or auto (direct where the backing filesystem takes it, else buffered with one log line)")(
        "transport", po::value(&transport)->default_value(transport), mount::kTransportHelp);
    add_config_option(opts, &config_option);
    add_master_key_options(opts, &master_key);
    add_allow_expensive_kdf_option(opts, &allow_expensive_kdf);
    std::string mountpoint;
    if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &cipherdir}, {"MOUNTPOINT", &mountpoint}}))
      return kExitOk;
    require_engine_name(engine.name);
    const auto backing_mode = parse_backing_io_mode(backing_io);
    if (!backing_mode) throw po::error("--backing-io must be direct, buffered or auto, got '" + backing_io + "'");
    engine.gpu.devices = parse_gpu_list(gpus);
    if (gpu_streams < 1 || gpu_streams > 64) throw po::error("--gpu-streams must be from 1 to 64");
    engine.gpu.streams_per_gpu = gpu_streams;
    mo.transport = mount::parse_transport(transport);
    // A read-only mount writes nothing to gather, and with the writeback cache the kernel keeps its
    // own idea of a file's size: a file that a read-write mount of the vault beside it grew would
    // read cut at its old length.
    if (writeback && no_writeback) throw po::error("--writeback-cache and --no-writeback-cache exclude each other");
    fso.writeback_cache = writeback && !mo.read_only;
    cipherdir = absolute(cipherdir);
    mo.mountpoint = absolute(mountpoint);
    mo.fsname = cipherdir;
    if (!log_file.empty()) log_file = absolute_file(log_file);

    std::chrono::milliseconds idle{0};
    if (!idle_text.empty()) idle = mount::parse_duration("--idle", idle_text);
    if (master_key.given() && (!pw_src.passfile.empty() || !pw_src.extpass.empty()))
      throw po::error("--masterkey replaces the password: give no --passfile or --extpass with it");
    if (!master_key.file.empty()) master_key.use = true;
    if (!master_key.chunk_size.empty() && !master_key.use) throw po::error("--chunk-size is for --masterkey");
    if (reverse) {
      if (!config_option.empty() || master_key.use || idle.count() || nonempty)
        throw po::error("--config, --masterkey, --idle and --nonempty are not for --reverse");
      mo.read_only = true;
      return mount_reverse(cipherdir, mo, engine, pw_src, log_file, allow_expensive_kdf);
    }
    // Every path and option value is checked before the password is asked for.
    require_vault_directory(cipherdir, "mount");
    const ConfigPlace place = config_place(cipherdir, config_option);
    VaultConfig config;
    // O_DIRECT needs format 2's aligned chunks: refused for a format 1 vault before anything else.
    const auto require_backing_io_fits = [&](const VaultConfig& c) {
      if (*backing_mode == BackingIoMode::Direct && c.version < 2)
        throw UserError("--backing-io direct needs a format 2 vault; " + cipherdir + " is format " +
                        std::to_string(c.version) + " (use auto or buffered)");
    };
    if (!master_key.use) {
      config = load_vault_config(place);
      config.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
      require_backing_io_fits(config);
    }
    mount::check_mountpoint(mo.mountpoint, kExitBadMountpoint, nonempty);
    if (mo.mountpoint == cipherdir || mo.mountpoint.starts_with(cipherdir + "/"))
      throw mount::MountFailure(kExitBadMountpoint, "the mountpoint must not lie inside CIPHERDIR");
    // One read-write mount per vault (mount/lifecycle/mount_lock.h); read-only ones join, and say so.
    std::vector<std::string> notes;
    if (!mo.read_only) {
      refuse_second_read_write_mount(cipherdir);
      for (const auto& m : gpucryptfs_mounts_of(cipherdir))
        if (m.read_only) notes.push_back("the vault is also mounted read-only on " + m.mountpoint);
    } else if (const LockHolder h = vault_write_lock_holder(cipherdir, std::chrono::milliseconds(0)); h.held) {
      notes.push_back("mounted read-only beside the vault's read-write mount" +
                      (h.mountpoint.empty() ? std::string() : " on " + h.mountpoint) +
                      ": what that mount changes shows here within about a second (in a file, once it is opened again)");
    }
    require_existing_gpus(engine.gpu.devices);
    require_usable_gpu_for(engine.name);
    // The parent of a detached mount keeps its copy until it returns: SecretString and
    // SecretBytes wipe them on every way out.
    SecretString password;
    SecretBytes master;
    if (master_key.use) {
      master = read_master_key(master_key);
      bool found = false;
      config = config_for_master_key(cipherdir, place, master, master_key, &notes, &found);
      if (!found)
        notes.push_back("mounted with the master key and no config; write a new config with 'gpucryptfs passwd "
                        "--masterkey " + cipherdir + "'");
      require_backing_io_fits(config);
    } else {
      password = read_password(pw_src, "Password: ");
    }

    auto setup = [&]() -> mount::FuseFilesystem {
      ::umask(0);  // the kernel has applied the caller's umask to every mode we are given
      if (!log_file.empty()) log::to_file(log_file);
      else if (!mo.foreground) mount::announce_detached_log(log::to_syslog_or_state_file());
      if (mo.allow_other) warn_if_others_reach(cipherdir, mo.foreground && !log_file.empty());
      for (const auto& n : notes) (master_key.use ? log::warning(n) : log::info(n));
      auto rv = std::make_shared<RunningVault>();
      if (master_key.use) rv->vault = Vault::open_with_master_key(cipherdir, config, master);
      else rv->vault = Vault::open(cipherdir, config, password.view(), kdf_policy(allow_expensive_kdf));
      password.clear();
      secure_wipe(master.data(), master.size());
      rv->vault->set_backing_io(*backing_mode);  // before any content file exists
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
      if (!mo.read_only) {
        try {
          rv->vault->open_journal(rv->engines->engine());
        } catch (const VaultInUse&) {  // another mount took it since the check above
          ::close(root_fd);
          throw mount::MountFailure(kExitVaultInUse, vault_in_use_message(cipherdir, vault_write_lock_holder(
                                                                                          cipherdir, std::chrono::milliseconds(0))));
        }
      }
      rv->fs = std::make_unique<mount::EncryptedFs>(*rv->vault, rv->engines->engine(), root_fd, fso);
      if (mo.allow_other && !mo.read_only) {  // only then do other users' requests come
        const std::string off = mount::enable_caller_charging(root_fd);
        log::info(off.empty() ? "space is charged to the caller it is written for (root's reserved blocks and quota "
                                "limits hold for other users)"
                              : "space is not charged to each caller: " + off);
      }
      mount::FuseFilesystem f;
      f.ops = &mount::EncryptedFs::operations();
      f.tmpfile_as_create = true;  // EncryptedFs::create makes O_TMPFILE files
      f.kills_setid_on_write = true;  // EncryptedFs::write honours FUSE_WRITE_KILL_SUIDGID
      f.direct_read = &mount::EncryptedFs::direct_read;
      f.direct_write = &mount::EncryptedFs::direct_write;
      if (idle.count()) {
        f.ops = mount::IdleWatch::counting(f.ops);
        f.direct_read = mount::IdleWatch::counting(f.direct_read);
        f.direct_write = mount::IdleWatch::counting(f.direct_write);
        rv->idle = std::make_unique<mount::IdleWatch>(idle, mount::unmount_served_mount);
      }
      f.userdata = rv->fs.get();
      f.keep_alive = rv;
      f.on_served = [weak = std::weak_ptr<RunningVault>(rv)] {
        if (auto v = weak.lock()) v->served();
      };
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
