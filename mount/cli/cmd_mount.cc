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
#include <fstream>
#include <iostream>
#include <iterator>

#include "crypto/errors.h"
#include "fs/master_key_probe.h"
#include "fs/rekey/rekey_record_file.h"
#include "fs/dir_iv.h"
#include "fs/forward_paths.h"
#include "mount/engines/engine_factory.h"
#include "fs/log.h"
#include "fs/vault.h"
#include "mount/cli/cli_checks.h"
#include "mount/daemon/caller_charge.h"
#include "mount/daemon/cipherdir_exposure.h"
#include "mount/daemon/control_socket.h"
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
  std::unique_ptr<ForwardPaths> paths;        // --ctlsock's path mapping
  std::unique_ptr<mount::ControlSocket> ctl;  // stopped before what it maps through goes
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
    ctl.reset();
    paths.reset();
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

// What the command line asks for, parsed and checked for itself (no file looked at yet).
struct MountArgs {
  PasswordSource pw_src;
  EngineOptions engine;
  mount::MountOptions mo;
  mount::FsOptions fso;
  std::string cipherdir, mountpoint, log_file, config_option, idle_text, ctlsock;
  std::vector<std::string> bad_names, exclude, exclude_wildcard, exclude_from;
  ReverseExtras reverse_extras;
  bool no_writeback = false, writeback = false, allow_expensive_kdf = false, reverse = false, nonempty = false;
  MasterKeyOptions master_key;
  std::string gpus, backing_io = "auto", transport = "auto";
  int gpu_streams = 4;
  BackingIoMode backing_mode{};
  std::chrono::milliseconds idle{0};
};

// What the daemon is handed to open the vault with, read before it starts: the config, the
// password or master key, and the notes for its log.
struct Unlocking {
  VaultConfig config;
  std::vector<std::string> notes;
  // The parent of a detached mount keeps its copy until it returns: SecretString and
  // SecretBytes wipe them on every way out.
  UnlockSecret secret;  // a password or a key file's content
  SecretBytes master;
};

// The exclusions of --exclude, --exclude-wildcard and --exclude-from (read here, as the user
// who mounts, before any password is asked for).
PathExclusions read_exclusions(const MountArgs& a) {
  PathExclusions out;
  for (const auto& p : a.exclude)
    if (!out.add_path(p)) throw po::error("--exclude " + p + ": names no path below PLAINDIR");
  for (const auto& p : a.exclude_wildcard) out.add_pattern(p);
  for (const auto& f : a.exclude_from) {
    std::ifstream in(f, std::ios::binary);
    if (!in.is_open()) throw po::error("--exclude-from " + f + ": cannot be opened");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw po::error("--exclude-from " + f + ": cannot be read");
    out.add_lines(text);
  }
  return out;
}

// gocryptfs's one-dash spellings of the options it shares with us, which Boost would read as -e
// with a value: "-exclude=secret" must never become --exclude xclude=secret.
std::string with_two_dashes(const std::string& arg) {
  if (arg == "-ew") return "--exclude-wildcard";
  if (arg == "-ef") return "--exclude-from";
  for (std::string_view name : {"exclude-wildcard", "exclude-from", "exclude", "ctlsock", "badname"})
    if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-' && arg.compare(1, name.size(), name) == 0 &&
        (arg.size() == name.size() + 1 || arg[name.size() + 1] == '='))
      return "-" + arg;
  return arg;
}

// Parses the command line into a. False: --help was shown.
bool parse_mount_args(int argc, char** argv, MountArgs& a) {
  po::options_description opts("usage: gpucryptfs mount [OPTIONS] CIPHERDIR MOUNTPOINT\n"
                               "       gpucryptfs mount --reverse [OPTIONS] PLAINDIR MOUNTPOINT\n\n"
                               "Mounts the vault in CIPHERDIR on the empty directory MOUNTPOINT and returns once "
                               "the mount is ready.\nOne read-write mount per vault: a second is refused (exit "
                               "status 31); --read-only ones may join it.\nWith --reverse, shows a read-only encrypted view of the "
                               "plaintext folder PLAINDIR instead\n(see 'gpucryptfs init --reverse').\n"
                               "Unmount with: fusermount3 -u MOUNTPOINT\n\noptions");
  opts.add_options()("help,h", "show this help")("passfile", po::value(&a.pw_src.passfile),
                                                 "read the password from the first line of this file")(
      "extpass", po::value(&a.pw_src.extpass), "run this shell command and read the password from its output")(
      "keyfile", po::value(&a.pw_src.keyfile),
      "unlock with this key file instead of a password: its whole content (any bytes, up to 8 MiB) is the secret")(
      "engine", po::value(&a.engine.name)->default_value("auto"),
      "cipher engine: cpu, gpu, or auto (the CPU and every usable GPU at once, sharing the work by measured rate)")(
      "foreground,f", po::bool_switch(&a.mo.foreground), "stay in the foreground and log to stderr")(
      "read-only", po::bool_switch(&a.mo.read_only),
      "mount read-only (allowed beside the vault's read-write mount, whose changes it shows)")(
      "nonempty", po::bool_switch(&a.nonempty), "mount even when MOUNTPOINT is not empty (what it holds is hidden while mounted)")(
      "idle", po::value(&a.idle_text),
      "unmount after this long unused (no request and no open file): 90s, 15m, 2h (default: never)")(
      "reverse", po::bool_switch(&a.reverse), "show the encrypted view of a plaintext folder (read-only, for backups)")(
      "allow-other", po::bool_switch(&a.mo.allow_other), "let other users use the mount (needs user_allow_other)")(
      "fuse-options,o", po::value(&a.mo.extra_options)->composing(), "extra FUSE mount options, comma-separated (may repeat)")(
      "log", po::value(&a.log_file), "append the log to this file (default when detached: syslog, or ~/.local/state/gpucryptfs/gpucryptfs.log where no syslog daemon listens)")(
      "writeback-cache", po::bool_switch(&a.writeback),
      "let the kernel gather writes into pages and send them later from its writeback worker: faster "
      "for one writer of small pieces, slower for several writers at once (default: every write is "
      "sent as it happens)")(
      "no-writeback-cache", po::bool_switch(&a.no_writeback), "the default; kept for scripts that name it")(
      "cpu-threads", po::value(&a.engine.cpu_threads)->default_value(0), "cpu engine threads (0: all cores)")(
      "gpus", po::value(&a.gpus)->default_value("all"),
      "GPUs the gpu engine uses, as 'gpucryptfs info' numbers them: all, or a list such as 0,1")(
      "gpu-streams", po::value(&a.gpu_streams)->default_value(a.gpu_streams),
      "CUDA streams per GPU: batches in flight at once, each with its own pinned staging")(
      "backing-io", po::value(&a.backing_io)->default_value(a.backing_io),
      "how a format 2 vault's chunk data meets CIPHERDIR: direct (O_DIRECT, no page-cache copy), buffered, "
      "or auto (direct where the backing filesystem takes it, else buffered with one log line)")(
      "transport", po::value(&a.transport)->default_value(a.transport), mount::kTransportHelp)(
      "ctlsock", po::value(&a.ctlsock),
      "serve gocryptfs's control socket here (mode 0600): JSON EncryptPath and DecryptPath requests map "
      "paths between the plaintext and the ciphertext side, for backup and sync tools")(
      "exclude,e", po::value(&a.exclude)->composing(),
      "--reverse: leave this path below PLAINDIR out of the view (may repeat; taken literally)")(
      "exclude-wildcard", po::value(&a.exclude_wildcard)->composing(),
      "--reverse: leave out what this gitignore pattern matches (may repeat; also -ew)")(
      "exclude-from", po::value(&a.exclude_from)->composing(),
      "--reverse: leave out what the gitignore lines of this file match (may repeat; also -ef)")(
      "badname", po::value(&a.bad_names)->composing(),
      "show entries matching this glob that do not decrypt (may repeat): a sync client's conflict copy as "
      "its plaintext name and the appended text ('report.txt (conflicted copy 2026-12-01)'), anything else "
      "raw with ' GPUCRYPTFS_BAD_NAME' appended; '*' covers every client");
  add_config_option(opts, &a.config_option);
  add_master_key_options(opts, &a.master_key);
  add_allow_expensive_kdf_option(opts, &a.allow_expensive_kdf);
  if (!parse_command_line(argc, argv, opts, {{"CIPHERDIR", &a.cipherdir}, {"MOUNTPOINT", &a.mountpoint}})) return false;
  require_engine_name(a.engine.name);
  const auto backing_mode = parse_backing_io_mode(a.backing_io);
  if (!backing_mode) throw po::error("--backing-io must be direct, buffered or auto, got '" + a.backing_io + "'");
  a.backing_mode = *backing_mode;
  a.engine.gpu.devices = parse_gpu_list(a.gpus);
  if (a.gpu_streams < 1 || a.gpu_streams > 64) throw po::error("--gpu-streams must be from 1 to 64");
  a.engine.gpu.streams_per_gpu = a.gpu_streams;
  a.mo.transport = mount::parse_transport(a.transport);
  // A read-only mount writes nothing to gather, and with the writeback cache the kernel keeps its
  // own idea of a file's size: a file that a read-write mount of the vault beside it grew would
  // read cut at its old length.
  if (a.writeback && a.no_writeback) throw po::error("--writeback-cache and --no-writeback-cache exclude each other");
  a.fso.writeback_cache = a.writeback && !a.mo.read_only;
  a.cipherdir = absolute(a.cipherdir);
  a.mo.mountpoint = absolute(a.mountpoint);
  a.mo.fsname = a.cipherdir;
  if (!a.log_file.empty()) a.log_file = absolute_file(a.log_file);
  if (!a.ctlsock.empty()) {
    a.ctlsock = absolute_file(a.ctlsock);
    if (const std::string why = mount::ControlSocket::check_path(a.ctlsock); !why.empty())
      throw po::error("--ctlsock " + a.ctlsock + ": " + why);
  }
  if (!a.idle_text.empty()) a.idle = mount::parse_duration("--idle", a.idle_text);
  require_one_secret_source(a.pw_src);
  if (a.master_key.given() && a.pw_src.given())
    throw po::error("--masterkey replaces the password: give no --passfile, --extpass or --keyfile with it");
  if (!a.master_key.file.empty()) a.master_key.use = true;
  if (!a.master_key.chunk_size.empty() && !a.master_key.use) throw po::error("--chunk-size is for --masterkey");
  if (a.reverse && (!a.config_option.empty() || a.master_key.use || a.idle.count() || a.nonempty || !a.bad_names.empty()))
    throw po::error("--config, --masterkey, --idle, --nonempty and --badname are not for --reverse");
  if (!a.reverse && (!a.exclude.empty() || !a.exclude_wildcard.empty() || !a.exclude_from.empty()))
    throw po::error("--exclude, --exclude-wildcard and --exclude-from are for --reverse");
  a.reverse_extras.exclusions = read_exclusions(a);
  a.reverse_extras.ctlsock = a.ctlsock;
  for (const auto& g : a.bad_names)
    if (g.empty()) throw po::error("--badname needs a pattern, e.g. --badname '*'");
  a.fso.bad_names = BadNamePatterns(a.bad_names);
  return true;
}

// Every path and option value is checked before the password is asked for; then the password or
// the master key is read, and the config that goes with it.
void check_and_read_secrets(const MountArgs& a, Unlocking& u) {
  const std::string& cipherdir = a.cipherdir;
  const mount::MountOptions& mo = a.mo;
  require_vault_directory(cipherdir, "mount");
  refuse_during_rekey(cipherdir, "mount");
  const ConfigPlace place = config_place(cipherdir, a.config_option);
  // O_DIRECT needs format 2's aligned chunks: refused for a format 1 vault before anything else.
  const auto require_backing_io_fits = [&](const VaultConfig& c) {
    if (a.backing_mode == BackingIoMode::Direct && c.version < 2)
      throw UserError("--backing-io direct needs a format 2 vault; " + cipherdir + " is format " +
                      std::to_string(c.version) + " (use auto or buffered)");
  };
  if (!a.master_key.use) {
    u.config = load_vault_config(place);
    u.config.check_kdf_cost(kdf_policy(a.allow_expensive_kdf));  // before asking for a password
    require_backing_io_fits(u.config);
  }
  mount::check_mountpoint(mo.mountpoint, kExitBadMountpoint, a.nonempty);
  if (mo.mountpoint == cipherdir || mo.mountpoint.starts_with(cipherdir + "/"))
    throw mount::MountFailure(kExitBadMountpoint, "the mountpoint must not lie inside CIPHERDIR");
  // One read-write mount per vault (mount/lifecycle/mount_lock.h); read-only ones join, and say so.
  if (!mo.read_only) {
    refuse_second_read_write_mount(cipherdir);
    for (const auto& m : gpucryptfs_mounts_of(cipherdir))
      if (m.read_only) u.notes.push_back("the vault is also mounted read-only on " + m.mountpoint);
  } else if (const LockHolder h = vault_write_lock_holder(cipherdir, std::chrono::milliseconds(0)); h.held) {
    u.notes.push_back("mounted read-only beside the vault's read-write mount" +
                      (h.mountpoint.empty() ? std::string() : " on " + h.mountpoint) +
                      ": what that mount changes shows here within about a second (in a file, once it is opened again)");
  }
  require_existing_gpus(a.engine.gpu.devices);
  require_usable_gpu_for(a.engine.name);
  if (a.master_key.use) {
    u.master = read_master_key(a.master_key);
    bool found = false;
    u.config = config_for_master_key(cipherdir, place, u.master, a.master_key, &u.notes, &found);
    if (!found)
      u.notes.push_back("mounted with the master key and no config; write a new config with 'gpucryptfs passwd "
                        "--masterkey " + cipherdir + "'");
    require_backing_io_fits(u.config);
  } else {
    u.secret = read_unlock_secret(a.pw_src, "Password: ");
  }
}

// A config that opens to a key under which nothing in CIPHERDIR decrypts: an old copy of the config
// from before `gpucryptfs rekey` (or another vault's). Mounting it would show an empty view. A
// root that cannot be sampled is left to the checks that follow, which name the damage.
void refuse_config_that_opens_nothing(const std::string& cipherdir, const KeyRing& keys, const DirIvSource& ivs) {
  MasterKeyProbe probe;
  try {
    probe = probe_master_key(cipherdir, keys, 4, &ivs);
  } catch (const UserError&) {
    return;
  }
  if (!probe.nothing_to_check() && !probe.key_fits())
    throw CodedError(kExitBadMasterKey,
                     "the config opened, but its master key decrypts none of the vault's names and files: it is a "
                     "copy of the config from before a 'gpucryptfs rekey' (the old master key opens nothing since), "
                     "or another vault's config; nothing was mounted");
}

// The daemon's setup (run_fuse_mount): opens the vault, builds the engines and the filesystem, in
// the process that serves.
mount::FuseFilesystem open_vault_filesystem(const MountArgs& a, Unlocking& u) {
  const std::string& cipherdir = a.cipherdir;
  const mount::MountOptions& mo = a.mo;
  ::umask(0);  // the kernel has applied the caller's umask to every mode we are given
  if (!a.log_file.empty()) log::to_file(a.log_file);
  else if (!mo.foreground) mount::announce_detached_log(log::to_syslog_or_state_file());
  if (mo.allow_other) warn_if_others_reach(cipherdir, mo.foreground && !a.log_file.empty());
  for (const auto& n : u.notes) (a.master_key.use ? log::warning(n) : log::info(n));
  auto rv = std::make_shared<RunningVault>();
  if (a.master_key.use) rv->vault = Vault::open_with_master_key(cipherdir, u.config, u.master);
  else {
    rv->vault = Vault::open(cipherdir, u.config, u.secret.text.view(), kdf_policy(a.allow_expensive_kdf), u.secret.kind);
  }
  u.secret.text.clear();
  log::info(a.master_key.use ? std::string("unlocked with the master key")
                             : unlocked_by_text(rv->vault->opened_slot(), rv->vault->opened_kind()));
  secure_wipe(u.master.data(), u.master.size());
  rv->vault->set_backing_io(a.backing_mode);  // before any content file exists
  if (!a.master_key.use) refuse_config_that_opens_nothing(cipherdir, rv->vault->keys(), rv->vault->dir_ivs());
  int root_fd = ::open(cipherdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) throw UserError("cannot open " + cipherdir + ": " + std::strerror(errno));
  DirIv iv{};
  if (rv->vault->dir_ivs().read(root_fd, &iv, cipherdir) != 0) {
    ::close(root_fd);
    throw CorruptData(cipherdir + "/" + kDirIvFileName + " is missing or damaged: the root's names cannot be read");
  }
  rv->engines = std::make_unique<EngineSet>(a.engine);
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
  rv->fs = std::make_unique<mount::EncryptedFs>(*rv->vault, rv->engines->engine(), root_fd, a.fso);
  if (!a.ctlsock.empty()) {
    UniqueFd paths_root(::open(cipherdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!paths_root) throw UserError("cannot open " + cipherdir + ": " + std::strerror(errno));
    rv->paths = std::make_unique<ForwardPaths>(std::move(paths_root), rv->vault->names(), rv->vault->dir_ivs(), a.fso.bad_names);
    rv->ctl = std::make_unique<mount::ControlSocket>(a.ctlsock, *rv->paths);
  }
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
  if (a.idle.count()) {
    f.ops = mount::IdleWatch::counting(f.ops);
    f.direct_read = mount::IdleWatch::counting(f.direct_read);
    f.direct_write = mount::IdleWatch::counting(f.direct_write);
    rv->idle = std::make_unique<mount::IdleWatch>(a.idle, mount::unmount_served_mount);
  }
  f.userdata = rv->fs.get();
  f.keep_alive = rv;
  f.on_served = [weak = std::weak_ptr<RunningVault>(rv)] {
    if (auto v = weak.lock()) v->served();
  };
  ChunkEngine& engine = rv->engines->engine();
  const ChunkLayout& layout = rv->vault->layout();
  f.allocate_buffer = [&engine](std::size_t n) { return engine.allocate_io_buffer(n); };
  f.on_worker_start = [&layout] { ContentFile::prepare_thread(layout, mount::max_request_bytes()); };
  return f;
}

}  // namespace

int cmd_mount(int argc, char** argv) {
  return run_command("mount", [&]() -> int {
    std::vector<std::string> args(argv, argv + argc);
    for (auto& arg : args) arg = with_two_dashes(arg);
    std::vector<char*> av;
    for (auto& s : args) av.push_back(s.data());
    av.push_back(nullptr);
    MountArgs a;
    if (!parse_mount_args(argc, av.data(), a)) return kExitOk;
    if (a.reverse) {
      a.mo.read_only = true;
      return mount_reverse(a.cipherdir, a.mo, a.engine, a.pw_src, a.log_file, a.allow_expensive_kdf, a.reverse_extras);
    }
    Unlocking u;
    check_and_read_secrets(a, u);
    return mount::run_fuse_mount(a.mo, [&] { return open_vault_filesystem(a, u); }, exit_code_for);
  });
}

}  // namespace gcfs::cli
