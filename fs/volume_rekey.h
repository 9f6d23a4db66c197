// `volume rekey`: a volume container moved to a new master key in place, crash-safe and resumable
// (docs/FORMAT.md, "Volume re-key"). The steps, each durable before the next:
//   1. the re-key record (new master key wrapped under the old, the header to end with) is written
//      into the config block's reserved part, then both header copies are marked (a release that
//      knows no re-key then refuses the container instead of mounting half of it);
//   2. the content stream is resealed segment by segment (fs/volume_rekey_pass.h), the record
//      saying how far it got;
//   3. both header copies are replaced by the new header (every kept key slot wrapping the new
//      master key), the backup areas past the stream are cut off, and the record is wiped.
// Run again after a stop at any point, it goes on from the record, with any secret that opens
// either the old header or (after step 3 began) the new one.
#pragma once

#include <cstdint>
#include <functional>

#include "crypto/chunk_engine.h"
#include "crypto/rekey_plan.h"
#include "crypto/secret.h"
#include "crypto/vault_config.h"
#include "fs/volume_container.h"
#include "fs/volume_rekey_pass.h"

namespace gcfs {

struct VolumeRekeyResult {
  bool resumed = false;        // a record was found and finished
  SecretBytes new_master;      // to print, once
  StreamRekeyStats stats;
  std::uint64_t volume_bytes = 0;
};

// Makes the new master key and the header the re-key ends with (crypto/rekey_plan.h): a fresh
// start only, since a resumed re-key has both in its record. Called before anything is written.
using MakeRekeyPlan = std::function<RekeyPlan()>;

// vol: opened writable with rekey = true and unlocked; unlocked_master is what unlock() returned.
// segment_bytes: the hot zone's size for a fresh start (rounded to whole chunks).
// Throws CorruptData when a record is there but does not authenticate (nothing is changed).
VolumeRekeyResult rekey_volume(VolumeContainer& vol, const SecretBytes& unlocked_master,
                               const MakeRekeyPlan& make_plan, ChunkEngine& engine,
                               const StreamRekeyPass::Report& report, std::uint64_t segment_bytes = 16u << 20);

}  // namespace gcfs
