#include "fs/vault.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fs/config_file.h"
#include "fs/dir_iv.h"
#include "fs/journal_recovery.h"
#include "fs/log.h"
#include "fs/unique_fd.h"

namespace gcfs {
namespace {

void require_empty_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw UserError("CIPHERDIR " + dir + ": " + std::strerror(errno) + " (create an empty directory first)");
  if (!S_ISDIR(st.st_mode)) throw UserError("CIPHERDIR " + dir + " is not a directory");
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw UserError("CIPHERDIR " + dir + ": " + std::strerror(errno));
  bool empty = true;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  ::closedir(d);
  if (!empty) throw UserError("CIPHERDIR " + dir + " is not empty; a new vault needs an empty directory");
}

}  // namespace

std::string unlocked_by_text(int slot, KeySlotKind kind) {
  if (slot < 0) return "unlocked with the password (a config of version 1, without key slots)";
  return "unlocked with key slot " + std::to_string(slot) + " (a " + std::string(key_slot_kind_words(kind)) + ")";
}

std::string config_path(const std::string& cipherdir) { return cipherdir + "/" + kConfigFileName; }

void Vault::create(const std::string& cipherdir, std::string_view secret, std::uint32_t chunk_size,
                   const ScryptParams& scrypt, SecretBytes* master_out, const std::string& config_dir,
                   const std::string& config_name, int format, KeySlotKind slot_kind, std::uint32_t long_name_max,
                   bool deterministic_names) {
  require_empty_dir(cipherdir);
  VaultConfig cfg = VaultConfig::create(secret, chunk_size, scrypt, VaultKind::Directory, master_out, format, slot_kind,
                                        long_name_max, deterministic_names);
  UniqueFd dir(::open(cipherdir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw UserError("cannot open " + cipherdir + ": " + std::strerror(errno));
  // The dir IV first (none with deterministic names): a vault whose config exists is complete.
  // Synced with its name: a config kept elsewhere (--config) does not sync CIPHERDIR for it.
  if (int rc = DirIvSource(cfg.has_deterministic_names()).create(dir.get(), nullptr); rc < 0 || (rc = sync_directory(dir.get())) < 0)
    throw UserError("cannot write " + cipherdir + "/" + kDirIvFileName + ": " + std::strerror(-rc));
  if (config_dir.empty()) {
    write_config_file_at(dir.get(), cipherdir, cfg, config_name);
    return;
  }
  UniqueFd cdir(::open(config_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cdir) throw UserError("cannot open the config's directory " + config_dir + ": " + std::strerror(errno));
  write_config_file_at(cdir.get(), config_dir, cfg, config_name);
}

VaultConfig Vault::load_config(const std::string& cipherdir) { return load_config(cipherdir, kConfigFileName); }

VaultConfig Vault::load_config(const std::string& config_dir, const std::string& config_name) {
  VaultConfig cfg = read_config_file(config_dir, config_name);
  if (cfg.kind != VaultKind::Directory)
    throw UserError(config_dir + "/" + config_name + " is a volume's config: use 'gpucryptfs volume mount'");
  return cfg;
}

std::unique_ptr<Vault> Vault::open_with_master_key(const std::string& cipherdir, const VaultConfig& config,
                                                   const SecretBytes& master) {
  if (master.size() != kMasterKeyBytes) throw UserError("a master key is " + std::to_string(kMasterKeyBytes) + " bytes");
  return std::unique_ptr<Vault>(new Vault(cipherdir, config, master));
}

std::unique_ptr<Vault> Vault::open(const std::string& cipherdir, const VaultConfig& config, std::string_view secret,
                                   KdfPolicy kdf_policy, KeySlotKind kind) {
  int slot = -1;
  SecretBytes master = config.unlock(secret, kdf_policy, kind, &slot);
  std::unique_ptr<Vault> v(new Vault(cipherdir, config, master));
  v->opened_slot_ = slot;
  v->opened_kind_ = kind;
  return v;
}

std::string Vault::journal_path() const { return cipherdir_ + "/" + kJournalFileName; }

std::size_t Vault::open_journal(ChunkEngine& engine) {
  std::string error;
  bool busy = false;
  UniqueFd dir(::open(cipherdir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    log::warning("crash journal: cannot open CIPHERDIR " + cipherdir_ + ": " + std::strerror(errno) +
                 "; rewrites of this mount are not protected against the daemon dying");
    return 0;
  }
  // Taking the journal's lock first: recovery must never run while another daemon writes.
  auto j = ChunkJournal::open(dir.get(), cipherdir_, keys_, config_.chunk_size, kJournalDefaultSlots, &error, &busy);
  if (!j && busy) throw VaultInUse(error);  // one read-write mount per vault: the journal's lock is the vault's
  if (!j) {
    log::warning("crash journal: " + error +
                 "; the vault is mounted without its crash journal: rewrites of this mount are not protected "
                 "against the daemon dying (move it out of CIPHERDIR to get the journal back)");
    return 0;
  }
  const JournalScan scan = j->existing_records();
  if (!scan.damage.empty()) log::warning("crash journal: " + scan.damage);
  if (scan.rejected)
    log::info("crash journal: " + std::to_string(scan.rejected) +
              " record(s) ignored: torn by the daemon's death, or not written with this vault's key");
  std::size_t restored = 0;
  if (!scan.records.empty()) {
    restored = recover_from_journal(dir.get(), cipherdir_, scan.records, layout_, keys_, engine);
    if (int rc = j->invalidate(scan.records); rc < 0)
      log::warning("crash journal: cannot clear the records recovery has dealt with: " + std::string(std::strerror(-rc)));
    log::info("crash journal: " + std::to_string(scan.records.size()) + " record(s) of interrupted writes checked" +
              (scan.legacy ? " (" + std::to_string(scan.legacy) + " in the previous release's format)" : std::string()) +
              ", " + std::to_string(restored) + " chunk(s) restored");
  }
  journal_ = std::move(j);
  return restored;
}

void Vault::set_backing_io(BackingIoMode mode) {
  backing_io_ = std::make_unique<BackingIo>(mode);
  if (mode == BackingIoMode::Buffered) return;
  if (!layout_.aligned()) {
    // Format 1's chunk data is not aligned to blocks: O_DIRECT cannot carry it.
    if (mode == BackingIoMode::Direct)
      throw UserError("--backing-io direct needs a format 2 vault; " + cipherdir_ + " is format " +
                      std::to_string(config_.version) + " (use auto or buffered)");
    log::info("backing I/O: buffered (format " + std::to_string(config_.version) + " vault: chunks are not aligned)");
    backing_io_->disable();
    return;
  }
  // The probe reads the root directory's IV: every vault of every format has it in CIPHERDIR
  // (docs/FORMAT.md), where the config may not be (mount --config keeps it elsewhere). A vault
  // with deterministic names has no IV file: its config is read instead, and when that is kept
  // elsewhere there is nothing of the vault's in CIPHERDIR to try, so buffered I/O it is.
  UniqueFd dir(::open(cipherdir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const bool deterministic = dir_ivs_.deterministic();
  BackingIo::Probe probe;
  if (dir) probe = BackingIo::probe(dir.get(), deterministic ? kConfigFileName : kDirIvFileName);
  else probe = {BackingIo::Probe::Outcome::Refused, "cannot open " + cipherdir_ + ": " + std::strerror(errno)};
  if (deterministic && probe.outcome == BackingIo::Probe::Outcome::Damaged)
    probe = {BackingIo::Probe::Outcome::Refused, std::string("no ") + kConfigFileName +
                                                     " in CIPHERDIR to try O_DIRECT on (" + probe.why + ")"};
  if (probe.outcome == BackingIo::Probe::Outcome::Damaged) {
    // Reported as the mount's own check of the root IV would (fs/dir_iv.h), what was found named.
    const std::string where = cipherdir_ + "/" + kDirIvFileName;
    log::error(where + ": cannot open the directory IV: " + probe.why +
               " (damaged: names in this directory cannot be read or written)");
    throw CorruptData(where + (probe.why == "missing" ? " is missing" : " is damaged (" + probe.why + ")") +
                      ": the root's names cannot be read");
  }
  const std::string& why = probe.why;
  if (probe.outcome == BackingIo::Probe::Outcome::Direct) {
    log::info(std::string("backing I/O: O_DIRECT (--backing-io ") + backing_io_mode_name(mode) + ")");
    return;
  }
  if (mode == BackingIoMode::Direct)
    throw UserError("--backing-io direct: " + cipherdir_ + " does not take O_DIRECT (" + why + ")");
  backing_io_->fall_back(cipherdir_ + ": " + why);
}

Vault::Vault(std::string cipherdir, VaultConfig config, const SecretBytes& master)
    : cipherdir_(std::move(cipherdir)),
      config_(std::move(config)),
      keys_(master),
      layout_(config_.chunk_size, 0, config_.version),
      names_(keys_, config_.long_name_max ? config_.long_name_max : kMaxNameBytes),
      dir_ivs_(config_.has_deterministic_names()) {}

}  // namespace gcfs
