// What each command checks on its paths and option values before it asks for a password, so a
// typo never costs a password typed twice. Each check throws with its documented exit code
// (mount/cli/commands.h): a missing or wrong-kind CIPHERDIR or CONTAINER gives 6, a vault of the
// other kind (a volume container given to mount, a directory vault given to volume mount) 23.
#pragma once

#include <string>
#include <vector>

namespace gcfs::cli {

// CIPHERDIR of mount, passwd, info, fsck: an existing directory (6) that is not a volume
// container (23, pointing at `gpucryptfs volume <volume_command>`). Whether it holds a config is
// Vault::load_config's to say.
void require_vault_directory(const std::string& cipherdir, const std::string& volume_command);

// CIPHERDIR of init: an existing, empty directory (6).
void require_empty_directory(const std::string& cipherdir);

// CONTAINER of the volume commands: an existing regular file (6) whose header is a volume
// container's (23; a directory vault points at `gpucryptfs <directory_command>` when one is given).
void require_volume_container(const std::string& container, const std::string& directory_command);

// CONTAINER of volume create: not there yet, in an existing directory (6).
void require_new_container(const std::string& container);

// --engine: cpu, gpu or auto; anything else is a usage error (2).
void require_engine_name(const std::string& name);

// --gpus: every number must name a GPU this machine has (`gpucryptfs info` numbering); a usage
// error (2) saying how many there are, or why there are none, whether or not this build has CUDA.
void require_existing_gpus(const std::vector<int>& gpus);

// --engine gpu: a usable GPU must be there, said before the password prompt (1, with the reason).
void require_usable_gpu_for(const std::string& engine_name);

// The mountpoint of a gpucryptfs mount whose source is cipherdir (as mount sets fsname), or ""
// when it is not mounted. Read from /proc/self/mountinfo.
std::string find_mountpoint_of(const std::string& cipherdir);

}  // namespace gcfs::cli
