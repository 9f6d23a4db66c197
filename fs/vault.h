// A directory vault on disk: creating one (init) and opening one with its password (mount,
// passwd, fsck). An open Vault holds the keys, the chunk layout and the name mapping that
// everything reading or writing the vault needs; it lives at a fixed address because content
// files and the daemon keep references into it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "crypto/chunk_engine.h"
#include "crypto/errors.h"
#include "crypto/key_ring.h"
#include "crypto/vault_config.h"
#include "fs/backing_io.h"
#include "fs/chunk_journal.h"
#include "fs/chunk_layout.h"
#include "fs/dir_iv_source.h"
#include "fs/name_mapping.h"
#include "fs/vault_errors.h"

namespace gcfs {

class Vault {
 public:
  // Writes a new config and the root directory IV into cipherdir, which must exist and be empty.
  // Throws UserError naming the problem.
  // master_out: the new master key, for `init` to print once. config_dir and config_name: where the
  // config goes (init --config FILE); by default CIPHERDIR/gpucryptfs.conf. format: the content
  // format version (1 or 2; docs/FORMAT.md). slot_kind: whether `secret` is a password or a key
  // file's content (key slot 0 of the new config). long_name_max: init --longnamemax (0: none).
  // deterministic_names: init --deterministic-names (no IV files, the root's neither).
  static void create(const std::string& cipherdir, std::string_view secret, std::uint32_t chunk_size,
                     const ScryptParams& scrypt, SecretBytes* master_out = nullptr,
                     const std::string& config_dir = "", const std::string& config_name = kConfigFileName,
                     int format = kDefaultDirectoryFormat, KeySlotKind slot_kind = KeySlotKind::Password,
                     std::uint32_t long_name_max = 0, bool deterministic_names = false);

  // Reads cipherdir's config (fs/config_file.h: beneath CIPHERDIR, never through a link, never
  // blocking, at most a few KiB): NotAVault when it is missing, CorruptData when it is damaged or
  // not a regular file, UserError for a volume config or a newer format.
  static VaultConfig load_config(const std::string& cipherdir);
  // The same for a config kept outside CIPHERDIR (--config FILE): config_name in config_dir.
  static VaultConfig load_config(const std::string& config_dir, const std::string& config_name);

  // Unlocks config with a password or a key file's content (kind): WrongPassword when it does not
  // open, ExpensiveKdf (before any scrypt) when a cost is above what init creates and kdf_policy
  // does not allow it, CorruptData when a slot opens but the config's digest refuses its key.
  static std::unique_ptr<Vault> open(const std::string& cipherdir, const VaultConfig& config,
                                     std::string_view secret,
                                     KdfPolicy kdf_policy = KdfPolicy::RefuseAboveInit,
                                     KeySlotKind kind = KeySlotKind::Password);

  // With the master key itself (mount --masterkey): nothing is checked here; the caller checks
  // the key against the vault's files first (fs/master_key_probe.h). config: the vault's, or
  // VaultConfig::defaults() with the chunk size the files give when the config is lost.
  static std::unique_ptr<Vault> open_with_master_key(const std::string& cipherdir, const VaultConfig& config,
                                                     const SecretBytes& master);

  Vault(const Vault&) = delete;
  Vault& operator=(const Vault&) = delete;

  const std::string& cipherdir() const { return cipherdir_; }
  const VaultConfig& config() const { return config_; }
  const KeyRing& keys() const { return keys_; }
  // What opened it, for the log (unlocked_by_text): the key slot (-1: a config of version 1, or
  // the master key) and its kind.
  int opened_slot() const { return opened_slot_; }
  KeySlotKind opened_kind() const { return opened_kind_; }
  const ChunkLayout& layout() const { return layout_; }
  // Whether content files use O_DIRECT (format 2; mount's --backing-io). Buffered until set.
  BackingIo& backing_io() const { return *backing_io_; }
  // Chooses the backing I/O mode, checking that CIPHERDIR takes O_DIRECT by reading the root
  // directory's IV with it (the one file every vault keeps in CIPHERDIR; a vault with
  // deterministic names has none, and reads its config there instead): auto falls back to
  // buffered with one log line saying why; direct throws UserError instead. Throws CorruptData,
  // in either mode, when that IV is missing or not a regular file (a FIFO, a link: never followed,
  // never blocked on).
  void set_backing_io(BackingIoMode mode);
  const NameMapping& names() const { return names_; }
  // Each directory's name IV: its gpucryptfs.diriv, or the constant IV (init --deterministic-names).
  const DirIvSource& dir_ivs() const { return dir_ivs_; }

  // For a read-write mount: restores the chunks that a daemon killed in the middle of a rewrite
  // left torn (journal_recovery.h), then opens CIPHERDIR/gpucryptfs.journal for the writes of
  // this mount. Its lock is the vault's write lock: when another live process holds it (a second
  // read-write mount), throws VaultInUse before recovering anything. When the file cannot be had
  // (CIPHERDIR refuses it: a FIFO, a link in its place), logs a warning and leaves journal() null:
  // the mount then runs unprotected, as before.
  // Returns the number of chunks restored.
  std::size_t open_journal(ChunkEngine& engine);
  // The crash journal that ContentFiles of this vault write their pre-images to; null when not
  // opened (fsck, read-only mounts).
  ChunkJournal* journal() const { return journal_.get(); }
  // Closes the journal, which releases the vault's write lock. For the end of a mount, once no
  // content file is left: the engines' teardown that follows (a GPU context takes seconds) must not
  // keep a new mount of the vault waiting on a lock nothing uses any more.
  void close_journal() { journal_.reset(); }
  std::string journal_path() const;

 private:
  Vault(std::string cipherdir, VaultConfig config, const SecretBytes& master);
  std::string cipherdir_;
  VaultConfig config_;
  KeyRing keys_;
  ChunkLayout layout_;
  NameMapping names_;
  DirIvSource dir_ivs_;
  std::unique_ptr<ChunkJournal> journal_;
  int opened_slot_ = -1;
  KeySlotKind opened_kind_ = KeySlotKind::Password;
  std::unique_ptr<BackingIo> backing_io_ = std::make_unique<BackingIo>();
};

std::string config_path(const std::string& cipherdir);
// "unlocked with key slot 2 (a key file)": what the log says once a config opened (slot -1: a
// config of version 1).
std::string unlocked_by_text(int slot, KeySlotKind kind);

}  // namespace gcfs
