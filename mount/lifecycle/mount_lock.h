// One read-write mount per vault. The lock is the exclusive flock that a read-write daemon holds
// on CIPHERDIR/gpucryptfs.journal for its whole life (fs/chunk_journal.h), so it needs no file of
// its own and goes with its holder: the kernel drops an flock when the process dies, SIGKILL
// included, so a killed daemon never leaves a stale lock behind. (Its mount may stay listed in
// /proc/self/mountinfo, dead, until someone unmounts it: that listing alone never blocks a mount.)
//
// The daemon takes the lock itself (Vault::open_journal throws VaultInUse); what lives here is
// the check `mount` makes before it asks for a password, and the one-line message that names the
// mountpoint that holds the vault.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "fs/unique_fd.h"

namespace gcfs::cli {

// A gpucryptfs mount listed in /proc/self/mountinfo.
struct ListedMount {
  std::string mountpoint;
  bool read_only = false;
};

// The fuse.gpucryptfs mounts whose source (fsname) is path (CIPHERDIR or a volume container),
// oldest first. The kernel keeps listing a mount whose daemon died until it is unmounted.
std::vector<ListedMount> gpucryptfs_mounts_of(const std::string& path);

// Who holds the write lock of a vault.
struct LockHolder {
  bool held = false;
  std::string mountpoint;  // the newest read-write mount of the vault listed here; "" when none is
  pid_t pid = 0;           // from /proc/locks; 0 when not seen there (another pid namespace)
};

// Whether a live process holds CIPHERDIR/gpucryptfs.journal's lock (a missing journal is not
// held). Never creates or blocks on anything in CIPHERDIR. When the lock is held but no read-write
// mount of the vault is listed, waits up to `grace` for it to go: the holder is most often the
// daemon of a mount that was just unmounted and is still exiting. With a grace, a holder still
// there after it that shares our mount namespace (so its mount, had it one, would be listed) is
// waited for up to 30 s more, with a line on stderr saying so.
LockHolder vault_write_lock_holder(const std::string& cipherdir, std::chrono::milliseconds grace);

// "CIPHERDIR is already mounted read-write on /mnt/x (one read-write mount per vault; ...)".
std::string vault_in_use_message(const std::string& cipherdir, const LockHolder& holder);

// Throws CodedError(kExitVaultInUse) with vault_in_use_message when a live read-write mount holds
// the vault. For `mount` without --read-only, before the password is asked for.
void refuse_second_read_write_mount(const std::string& cipherdir);

// fsck --repair: the vault's write lock (the crash journal's exclusive flock), taken as a
// read-write mount takes it and held as long as the returned descriptor is open: no daemon writes
// while entries move and chunks are put back, wherever it runs (another mount namespace, where its
// mount is not listed here), and no mount starts meanwhile. Without a journal there is no lock to
// take and nothing holds one: an empty descriptor, unless `create` (once the password has opened
// the vault: a wrong one must leave CIPHERDIR as it was), which makes the journal to hold it.
// Throws CodedError(kExitVaultInUse) naming the holder when it is held, UserError when the
// journal cannot be had (a FIFO or a link in its place, a read-only CIPHERDIR).
UniqueFd take_vault_write_lock(const std::string& cipherdir, const std::string& why, bool create);

// Volumes lock the container itself (fs/volume_container.h): exclusively when read-write, shared
// when read-only, so a read-only mount never joins a read-write one there (a filesystem in
// volume.img would see its blocks change under it). Throws CodedError(kExitVaultInUse) naming
// the mountpoint when a live mount holds the container against this one.
void refuse_mounted_volume(const std::string& container, bool read_only);

}  // namespace gcfs::cli
