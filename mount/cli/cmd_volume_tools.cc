// gpucryptfs volume info|passwd|fsck: what `info`, `passwd` and `fsck` are for a directory vault,
// for a volume container. info needs no password; passwd rewraps the same master key in both
// header slots; fsck authenticates every header copy and every chunk, with the directory fsck's
// progress and exit codes (0 clean, 26 damage).
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "crypto/errors.h"
#include "crypto/key_ring.h"
#include "fs/fsck/volume_check.h"
#include "mount/engines/engine_factory.h"
#include "fs/volume_container.h"
#include "mount/cli/byte_size.h"
#include "mount/cli/cli_checks.h"
#include "mount/cli/cli_options.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/cli/key_slot_text.h"
#include "mount/cli/password.h"

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

// Redrawn in place on a terminal; one line per tenth otherwise, so logs stay short.
class VolumeProgress {
 public:
  void update(std::uint64_t done, std::uint64_t total) {
    const int pct = total ? static_cast<int>(done * 100 / total) : 100;
    if (tty_) {
      const auto now = std::chrono::steady_clock::now();
      if (pct != 100 && now - last_ < std::chrono::milliseconds(100)) return;
      last_ = now;
      std::fprintf(stderr, "\rvolume fsck %3d%%  %llu/%llu MiB", pct, static_cast<unsigned long long>(done >> 20),
                   static_cast<unsigned long long>(total >> 20));
      drawn_ = true;
    } else if (pct / 10 > last_tenth_) {
      last_tenth_ = pct / 10;
      std::fprintf(stderr, "volume fsck: %d%%\n", pct);
    }
  }
  void finish() {
    if (drawn_) std::fputc('\n', stderr);
  }

 private:
  bool tty_ = ::isatty(STDERR_FILENO) == 1;
  bool drawn_ = false;
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

int volume_info(int argc, char** argv) {
  std::string container;
  po::options_description desc("usage: gpucryptfs volume info CONTAINER\n\n"
                               "Shows a volume container's parameters and its header copies; no password needed.\n\noptions");
  desc.add_options()("help,h", "this help");
  if (!parse_command_line(argc, argv, desc, {{"CONTAINER", &container}})) return kExitOk;
  require_volume_container(container, "info");
  const VolumeHeader h = VolumeContainer::read_header(container);  // CorruptData (23) when no copy is whole
  const VaultConfig& c = h.copies.front().config;
  struct stat st {};
  ::stat(container.c_str(), &st);
  std::cout << "Volume:       " << container << "\n"
            << "Format:       gpucryptfs version " << c.version << ", volume\n"
            << "Size:         " << format_byte_size(c.volume_size) << " (" << c.volume_size
            << " bytes, as the newest header copy says: authenticated only at unlock)\n"
            << "Cipher:       " << c.cipher << ", chunk size " << c.chunk_size << " bytes\n"
            << "On disk:      " << format_byte_size(static_cast<std::uint64_t>(st.st_blocks) * 512) << " of "
            << format_byte_size(static_cast<std::uint64_t>(st.st_size)) << " (sparse: unwritten chunks take no space)\n";
  print_key_slots(std::cout, c);
  for (const auto& copy : h.copies)
    std::cout << "Header copy:  slot " << copy.slot << ", generation " << copy.generation << ", volume size "
              << format_byte_size(copy.config.volume_size) << "\n";
  if (h.empty) std::cout << "Header:       " << h.empty << " slot(s) hold no copy\n";
  if (!h.damage.empty()) std::cout << "Damage:       " << h.damage << "\n";
  if (h.rekeying)
    std::cout << "Re-key:       in progress: run 'gpucryptfs volume rekey " << container
              << "' again to finish it (until then the volume cannot be used)\n";
  try {
    c.check_kdf_cost(KdfPolicy::RefuseAboveInit);
  } catch (const ExpensiveKdf& e) {
    std::cout << "Warning:      " << e.what() << "\n";
  }
  return kExitOk;
}

int volume_passwd(int argc, char** argv) {
  std::string container;
  PasswordSource old_src, new_src;
  bool allow_expensive_kdf = false;
  po::options_description desc("usage: gpucryptfs volume passwd [OPTIONS] CONTAINER\n\n"
                               "Changes the password of the unmounted volume in CONTAINER.\n\noptions");
  desc.add_options()("help,h", "this help")
      ("passfile", po::value(&old_src.passfile), "read the current password from this file")
      ("extpass", po::value(&old_src.extpass), "run this command for the current password")
      ("keyfile", po::value(&old_src.keyfile), "unlock with this key file instead of the current password")
      ("new-passfile", po::value(&new_src.passfile), "read the new password from this file")
      ("new-keyfile", po::value(&new_src.keyfile), "make the slot that opened a key file slot, of this file");
  add_allow_expensive_kdf_option(desc, &allow_expensive_kdf);
  if (!parse_command_line(argc, argv, desc, {{"CONTAINER", &container}})) return kExitOk;
  require_one_secret_source(old_src);
  require_new_secret_source(new_src);
  require_volume_container(container, "passwd");
  VolumeContainer vol(container, true);  // exclusive lock: refuses a mounted volume
  vol.check_kdf_cost(kdf_policy(allow_expensive_kdf));  // before asking for a password
  {
    const UnlockSecret old_pw = read_unlock_secret(old_src, "Current password: ");
    const UnlockSecret new_pw = read_unlock_secret(new_src, "New password: ", true);
    vol.change_password(old_pw.text.view(), new_pw.text.view(), kdf_policy(allow_expensive_kdf), old_pw.kind,
                        new_pw.kind);
  }  // both secrets are wiped here, or on the way out when unlocking throws
  if (vol.opened_slot() >= 0) std::cout << "Key slot " << vol.opened_slot() << " changed (both header copies).\n";
  else std::cout << "Password changed (both header copies).\n";
  std::cout
            << "Note: a copy of the container's old header (a backup of the file, a snapshot) still opens the volume "
               "with the old password: the master key is the same; see docs/SECURITY.md.\n";
  return kExitOk;
}

int volume_fsck(int argc, char** argv) {
  std::string container, engine = "auto";
  PasswordSource pw_src;
  bool allow_expensive_kdf = false;
  po::options_description desc("usage: gpucryptfs volume fsck [OPTIONS] CONTAINER\n\n"
                               "Authenticates both header copies and every chunk of the volume in CONTAINER and lists "
                               "what fails. Exit status 0: clean; 26: problems found. Holes are skipped. A mounted "
                               "volume is refused: its daemon holds the container's lock.\n\noptions");
  desc.add_options()("help,h", "this help")
      ("passfile", po::value(&pw_src.passfile), "read the password from the first line of this file")
      ("extpass", po::value(&pw_src.extpass), "run this command and read the password from its output")
      ("keyfile", po::value(&pw_src.keyfile), "unlock with this key file (its whole content) instead of a password")
      ("engine", po::value(&engine)->default_value(engine), "cipher engine: auto, cpu or gpu");
  add_allow_expensive_kdf_option(desc, &allow_expensive_kdf);
  if (!parse_command_line(argc, argv, desc, {{"CONTAINER", &container}})) return kExitOk;
  require_one_secret_source(pw_src);
  require_engine_name(engine);
  require_volume_container(container, "fsck");
  // A mounted volume holds the container's lock, so there is no --force: said with the mountpoint.
  if (const std::string mp = find_mountpoint_of(container); !mp.empty())
    throw UserError(container + " is mounted on " + mp + ": unmount it first ('fusermount3 -u " + mp + "')");
  VolumeContainer vol(container, false);  // read-only: fsck writes nothing
  vol.check_kdf_cost(kdf_policy(allow_expensive_kdf));
  require_usable_gpu_for(engine);
  const auto policy = kdf_policy(allow_expensive_kdf);
  std::vector<std::string> problems;
  SecretBytes master;
  {
    const UnlockSecret secret = read_unlock_secret(pw_src, "Password: ");
    const std::string_view password = secret.text.view();
    master = vol.unlock(password, policy, secret.kind);  // WrongPassword (12) when no copy opens
    // Every copy, not only the one in use: a copy that does not open is one damaged slot away
    // from a volume that cannot be unlocked, or a planted header.
    for (const auto& copy : vol.header().copies) {
      try {
        (void)copy.config.unlock(password, policy, secret.kind);
      } catch (const UserError& e) {
        problems.push_back("header copy in slot " + std::to_string(copy.slot) + " (generation " +
                           std::to_string(copy.generation) + ") does not open with this password (" + e.what() +
                           "): damaged, planted, or left by an interrupted passwd");
      }
    }
  }
  if (!vol.header().damage.empty()) problems.push_back("header: " + vol.header().damage);
  if (vol.header().empty > 0)
    problems.push_back(std::to_string(vol.header().empty) +
                       " header slot(s) hold no copy: one more damaged slot and the volume cannot be unlocked");
  try {
    vol.check_content_header();
  } catch (const CorruptData& e) {
    problems.push_back(e.what());
  }
  EngineOptions eo;
  eo.name = engine;
  EngineSet engines(eo);
  const KeyRing keys(master);
  VolumeProgress bar;
  const VolumeCheckReport rep = check_volume_content(vol.fd(), vol.layout(), keys, engines.engine(), vol.config().volume_size,
                                                     [&](std::uint64_t d, std::uint64_t t) { bar.update(d, t); });
  bar.finish();
  problems.insert(problems.end(), rep.problems.begin(), rep.problems.end());
  for (const auto& p : problems) std::cout << "problem: " << p << "\n";
  std::cout << "volume fsck: checked " << vol.header().copies.size() << " header copies, " << rep.chunks << " chunks ("
            << rep.holes << " holes), " << format_byte_size(rep.bytes) << " read: ";
  if (problems.empty()) {
    std::cout << "no problems.\n";
    return kExitOk;
  }
  std::cout << problems.size() << (problems.size() == 1 ? " problem" : " problems") << ".\n";
  return kExitFsckProblems;
}

}  // namespace gcfs::cli
