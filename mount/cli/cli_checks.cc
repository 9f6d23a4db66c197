// The checks each verb makes before it asks for a password, with their exit codes (cli_checks.h).
#include "mount/cli/cli_checks.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options/errors.hpp>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "crypto/vault_config.h"
#include "cuda/gpu_engine.h"
#include "fs/safe_open.h"
#include "fs/unique_fd.h"
#include "fs/volume_container.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/lifecycle/mount_lock.h"

namespace gcfs::cli {
namespace {

// True when one of the container's config slots starts with the volume magic (or the one it has
// in the middle of a re-key, which the commands then refuse saying so). O_NONBLOCK and the
// type checked on the descriptor: a FIFO put in place after the caller's stat never blocks.
bool has_volume_magic(const std::string& path) {
  const OpenResult r = open_regular(path, O_RDONLY);
  if (!r) return false;
  const UniqueFd& fd = r.fd;
  for (int slot = 0; slot < kVolumeSlots; ++slot) {
    char magic[sizeof(kVolumeMagic)];
    if (::pread(fd.get(), magic, sizeof magic, static_cast<off_t>(slot * kVolumeSlotBytes)) ==
            static_cast<ssize_t>(sizeof magic) &&
        (std::memcmp(magic, kVolumeMagic, sizeof magic) == 0 ||
         std::memcmp(magic, kVolumeRekeyingMagic, sizeof magic) == 0))
      return true;
  }
  return false;
}

// "a FIFO", "a socket", ...: what a path the user named turned out to be.
std::string type_words(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device node";
  if (S_ISREG(mode)) return "a regular file";
  return "neither a file nor a directory";
}

bool is_empty_directory(const std::string& dir, int* error) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    *error = errno;
    return false;
  }
  bool empty = true;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  ::closedir(d);
  *error = 0;
  return empty;
}

// list_gpus runs in a child process: CUDA initialised in this process would not survive the fork
// that detaches the mount's daemon, which builds its engines itself.
struct GpuProbe {
  int count = 0;
  std::string why_none;
};

GpuProbe probe_gpus() {
  GpuProbe out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw UserError(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw UserError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    std::string why;
    const auto gpus = list_gpus(&why);
    const std::string msg = std::to_string(gpus.size()) + "\n" + why;
    (void)!::write(fds[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  const auto nl = text.find('\n');
  if (nl == std::string::npos) {
    out.why_none = "the GPU probe failed";
    return out;
  }
  out.count = std::atoi(text.substr(0, nl).c_str());
  out.why_none = text.substr(nl + 1);
  return out;
}

}  // namespace

void require_vault_directory(const std::string& cipherdir, const std::string& volume_command) {
  struct stat st {};
  if (::stat(cipherdir.c_str(), &st) != 0)
    throw CodedError(kExitBadCipherDir, "CIPHERDIR " + cipherdir + ": " + std::strerror(errno) +
                                            " (create a vault with 'gpucryptfs init')");
  if (S_ISREG(st.st_mode) && has_volume_magic(cipherdir))
    throw CodedError(kExitBadConfig, cipherdir + " is a volume container: use `gpucryptfs volume " + volume_command + "`");
  if (!S_ISDIR(st.st_mode))
    throw CodedError(kExitBadCipherDir, "CIPHERDIR " + cipherdir + " is not a directory (" + type_words(st.st_mode) + ")");
}

void require_empty_directory(const std::string& cipherdir) {
  struct stat st {};
  if (::stat(cipherdir.c_str(), &st) != 0)
    throw CodedError(kExitBadCipherDir,
                     "CIPHERDIR " + cipherdir + ": " + std::strerror(errno) + " (create an empty directory first)");
  if (!S_ISDIR(st.st_mode)) throw CodedError(kExitBadCipherDir, "CIPHERDIR " + cipherdir + " is not a directory");
  int error = 0;
  const bool empty = is_empty_directory(cipherdir, &error);
  if (error) throw CodedError(kExitBadCipherDir, "CIPHERDIR " + cipherdir + ": " + std::strerror(error));
  if (!empty)
    throw CodedError(kExitBadCipherDir,
                     "CIPHERDIR " + cipherdir + " is not empty; a new vault needs an empty directory");
}

void require_volume_container(const std::string& container, const std::string& directory_command) {
  struct stat st {};
  if (::stat(container.c_str(), &st) != 0)
    throw CodedError(kExitBadCipherDir, "no volume container at " + container + ": " + std::strerror(errno) +
                                            " (create one with 'gpucryptfs volume create')");
  if (S_ISDIR(st.st_mode)) {
    if (::access((container + "/" + kConfigFileName).c_str(), F_OK) == 0)
      throw CodedError(kExitBadConfig, container + " is a directory vault, not a volume container" +
                                           (directory_command.empty() ? std::string()
                                                                      : ": use `gpucryptfs " + directory_command + "`"));
    throw CodedError(kExitBadCipherDir, container + " is a directory, not a volume container");
  }
  if (!S_ISREG(st.st_mode))
    throw CodedError(kExitBadCipherDir, container + " is " + type_words(st.st_mode) + ", not a volume container (a regular file)");
  if (!has_volume_magic(container))
    throw CodedError(kExitBadConfig, container + " is not a gpucryptfs volume container (neither config slot has its header)");
}

void require_new_container(const std::string& container) {
  struct stat st {};
  if (::lstat(container.c_str(), &st) == 0)
    throw CodedError(kExitBadCipherDir, container + " already exists; choose a new file name");
  const auto slash = container.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : container.substr(0, slash);
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw CodedError(kExitBadCipherDir, "cannot create " + container + ": the directory " + parent + " does not exist");
}

void require_engine_name(const std::string& name) {
  if (name != "cpu" && name != "gpu" && name != "auto")
    throw boost::program_options::error("--engine " + name + ": choose cpu, gpu or auto");
}

void require_existing_gpus(const std::vector<int>& gpus) {
  if (gpus.empty()) return;  // all
  const GpuProbe p = probe_gpus();
  for (int g : gpus) {
    if (g < p.count) continue;
    const std::string have =
        p.count == 0 ? "this machine has no usable GPU: " + p.why_none
                     : "this machine has " + std::to_string(p.count) + " GPU(s), numbered 0 to " + std::to_string(p.count - 1);
    throw boost::program_options::error("--gpus: there is no GPU " + std::to_string(g) + " (" + have +
                                        "; 'gpucryptfs info' lists them)");
  }
}

void require_usable_gpu_for(const std::string& engine_name) {
  if (engine_name != "gpu") return;
  const GpuProbe p = probe_gpus();
  if (p.count == 0) throw UserError("--engine gpu: the gpu engine cannot run: " + p.why_none + " (use --engine cpu or auto)");
}

std::string find_mountpoint_of(const std::string& cipherdir) {
  const auto mounts = gpucryptfs_mounts_of(cipherdir);
  return mounts.empty() ? "" : mounts.front().mountpoint;
}

}  // namespace gcfs::cli
