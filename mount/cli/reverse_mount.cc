// gpucryptfs mount --reverse: unlock and serve the read-only encrypted view (reverse_mount.h).
#include "mount/cli/reverse_mount.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "crypto/errors.h"
#include "fs/config_file.h"
#include "fs/log.h"
#include "fs/reverse_view.h"
#include "fs/vault.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/transport/request_loop.h"
#include "mount/daemon/control_socket.h"
#include "mount/daemon/reverse_fs.h"

namespace gcfs::cli {
namespace {

// Everything a running reverse mount owns, in the order it must be torn down.
struct RunningReverse {
  std::unique_ptr<Vault> vault;
  std::unique_ptr<EngineSet> engines;
  std::unique_ptr<ReverseView> view;
  std::unique_ptr<mount::ReverseFs> fs;
  std::unique_ptr<mount::ControlSocket> ctl;  // stopped before the view it maps through goes
  ~RunningReverse() {
    ctl.reset();
    fs.reset();
    view.reset();
    engines.reset();
    vault.reset();
  }
};

}  // namespace

int mount_reverse(const std::string& plaindir, mount::MountOptions mo, const EngineOptions& engine,
                  const PasswordSource& pw_src, const std::string& log_file, bool allow_expensive_kdf,
                  const ReverseExtras& extras) {
  struct stat st {};
  if (::stat(plaindir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw CodedError(kExitBadCipherDir, "PLAINDIR " + plaindir + ": " +
                                            (S_ISDIR(st.st_mode) ? std::strerror(errno) : "not a directory"));
  VaultConfig config;
  try {
    config = read_config_file(plaindir, kReverseConfigName);
  } catch (const NotAVault& e) {
    throw CodedError(kExitBadConfig, e.what());
  }
  if (config.kind != VaultKind::Directory) throw CodedError(kExitBadConfig, plaindir + "/" + kReverseConfigName + " is not a directory vault's config");
  config.check_kdf_cost(kdf_policy(allow_expensive_kdf));
  mount::check_mountpoint(mo.mountpoint, kExitBadMountpoint);
  // The view of a folder holding the view would list itself without end.
  if (mo.mountpoint == plaindir || mo.mountpoint.starts_with(plaindir + "/"))
    throw mount::MountFailure(kExitBadMountpoint, "the mountpoint must not lie inside PLAINDIR");
  require_existing_gpus(engine.gpu.devices);
  require_usable_gpu_for(engine.name);
  mo.read_only = true;
  mo.fsname = plaindir;
  mo.subtype = "gpucryptfs-reverse";
  UnlockSecret secret = read_unlock_secret(pw_src, "Password: ");

  auto setup = [&]() -> mount::FuseFilesystem {
    if (!log_file.empty()) log::to_file(log_file);
    else if (!mo.foreground) mount::announce_detached_log(log::to_syslog_or_state_file());
    auto rv = std::make_shared<RunningReverse>();
    rv->vault = Vault::open(plaindir, config, secret.text.view(), kdf_policy(allow_expensive_kdf), secret.kind);
    secret.text.clear();
    log::info(unlocked_by_text(rv->vault->opened_slot(), rv->vault->opened_kind()));
    const int root_fd = ::open(plaindir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) throw UserError("cannot open " + plaindir + ": " + std::strerror(errno));
    rv->engines = std::make_unique<EngineSet>(engine);
    log::info(rv->engines->description());
    rv->view = std::make_unique<ReverseView>(root_fd, *rv->vault, rv->engines->engine(), config.to_json());
    rv->view->set_exclusions(extras.exclusions);
    if (!extras.ctlsock.empty()) rv->ctl = std::make_unique<mount::ControlSocket>(extras.ctlsock, *rv->view);
    rv->fs = std::make_unique<mount::ReverseFs>(*rv->view);
    mount::FuseFilesystem f;
    f.ops = &mount::ReverseFs::operations();
    f.userdata = rv->fs.get();
    f.keep_alive = rv;
    ChunkEngine& eng = rv->engines->engine();
    f.allocate_buffer = [&eng](std::size_t n) { return eng.allocate_io_buffer(n); };
    return f;
  };
  return mount::run_fuse_mount(mo, setup, exit_code_for);
}

}  // namespace gcfs::cli
