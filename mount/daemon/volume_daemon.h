// The FUSE side of volume mode: a filesystem with one regular file, volume.img, whose bytes are the
// volume's plaintext. Every request on it goes straight to one ContentFile over the container's
// content stream; the chunk range locks inside ContentFile let requests on different chunks run
// at once (the multi-threaded loop hands them to different workers), which is what lets the gpu
// engine gather them into large batches.
#pragma once

#include <string>

#include "crypto/secret.h"
#include "crypto/vault_config.h"
#include "mount/engines/engine_factory.h"
#include "mount/lifecycle/fuse_runner.h"

namespace gcfs::mount {

constexpr const char* kVolumeImageName = "volume.img";

struct VolumeMountSetup {
  std::string container;
  SecretString password;  // or a key file's content, as password_kind says
  KeySlotKind password_kind = KeySlotKind::Password;
  EngineOptions engine;
  bool read_only = false;
  KdfPolicy kdf_policy = KdfPolicy::RefuseAboveInit;  // --allow-expensive-kdf
};

// Opens and unlocks the container and builds the engine: the `setup` step of run_fuse_mount, run
// in the daemon after it detached. Throws WrongPassword, CorruptData or UserError with a message
// that names the container. Wipes setup.password once the key is unwrapped.
FuseFilesystem make_volume_filesystem(VolumeMountSetup& setup);

}  // namespace gcfs::mount
