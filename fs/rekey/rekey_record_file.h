// Where a directory vault keeps its re-key record (crypto/rekey_record.h): two copies in the root
// of CIPHERDIR, gpucryptfs.rekey and gpucryptfs.rekey.copy, each written atomically (a new file
// made with O_EXCL, fsynced, renamed over, the directory fsynced). A copy that is torn, truncated
// or edited fails its authentication and the other is used; with both bad the re-key is refused,
// never resumed from a guess. While either exists, the vault is half re-keyed: mount, fsck,
// passwd and keyslot refuse (refuse_during_rekey) until `rekey` finishes it.
#pragma once

#include <optional>
#include <string>

#include "crypto/rekey_record.h"

namespace gcfs {

constexpr const char* kRekeyRecordName = "gpucryptfs.rekey";
constexpr const char* kRekeyRecordCopyName = "gpucryptfs.rekey.copy";

// Whether CIPHERDIR holds a re-key record (either copy, of any type: even a damaged one means the
// vault may be half re-keyed).
bool rekey_in_progress(const std::string& cipherdir);
// Throws VaultInUse (exit 31) "CIPHERDIR: a re-key is in progress: run `gpucryptfs rekey` again ..." when
// rekey_in_progress; `what` names the command refused.
void refuse_during_rekey(const std::string& cipherdir, const std::string& what);

// Both copies, durably, before any data changes. Throws UserError naming the problem.
void write_rekey_record(int cipherdir_fd, const RekeyRecord& record);

struct LoadedRekeyRecord {
  RekeyRecord record;
  SecretBytes new_master;
  std::string note;  // a damaged copy that was passed over (for the log), or ""
};

// The record that opens under old_master (either copy). nullopt when neither copy exists.
// Throws CorruptData when copies exist but none opens: `why_not` (out) holds each copy's reason;
// the caller decides whether the vault's config is already the new one (then the records are
// left over from a finished re-key) or refuses.
std::optional<LoadedRekeyRecord> load_rekey_record(int cipherdir_fd, const SecretBytes& old_master,
                                                   std::string* why_not);
// The new config a copy holds, read without authentication (to recognise a finished re-key whose
// config is already in place: the caller compares it with the config that opened). nullopt when no
// copy parses.
std::optional<std::string> peek_rekey_record_config(int cipherdir_fd);

// Removes both copies and fsyncs CIPHERDIR. Throws UserError.
void remove_rekey_record(int cipherdir_fd);

}  // namespace gcfs
