#include "fs/volume_rekey.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "crypto/errors.h"
#include "crypto/key_ring.h"
#include "fs/chunk_auth.h"
#include "fs/log.h"
#include "fs/volume_rekey_record.h"

namespace gcfs {
namespace {

// The stream's end: where the backup areas begin, and where the container is cut at the end.
std::uint64_t stream_end(const VolumeContainer& vol, const VaultConfig& c) {
  return kVolumeConfigBlockBytes + vol.layout().cipher_size(c.volume_size);
}

OpenedVolumeRekey start(VolumeContainer& vol, const SecretBytes& old_master, const MakeRekeyPlan& make_plan,
                        std::uint64_t segment_bytes, VolumeRekeyCopies* copies) {
  vol.check_stream_size();  // an interrupted resize rolled back first: the pass covers volume_size
  (void)vol.check_content_header();
  OpenedVolumeRekey o;
  o.old_master = old_master;
  RekeyPlan plan = make_plan();
  o.new_master = std::move(plan.new_master);
  VaultConfig next = std::move(plan.new_config);
  if (next.kind != VaultKind::Volume || next.volume_size != vol.config().volume_size ||
      next.chunk_size != vol.config().chunk_size)
    throw std::logic_error("rekey_volume: the new header changes more than the keys");
  (void)encode_volume_slot(next, 1);  // too large: refused before anything changes
  const std::uint64_t seg = std::max<std::uint64_t>(1, segment_bytes / vol.config().chunk_size);
  o.record = make_volume_rekey(o.old_master, o.new_master, std::move(next), seg);
  write_volume_rekey(vol.fd(), vol.path(), o.record, o.new_master, copies);
  vol.replace_config(vol.config(), true);  // the same header, marked
  return o;
}

}  // namespace

VolumeRekeyResult rekey_volume(VolumeContainer& vol, const SecretBytes& unlocked_master,
                               const MakeRekeyPlan& make_plan, ChunkEngine& engine,
                               const StreamRekeyPass::Report& report, std::uint64_t segment_bytes) {
  const std::string& label = vol.path();
  VolumeRekeyCopies copies = read_volume_rekey_copies(vol.fd(), label);
  VolumeRekeyResult result;
  OpenedVolumeRekey o;
  // The re-key keeps the volume's size and chunk size (start() checks the new header for that).
  const std::uint64_t total = vol.config().volume_size / vol.config().chunk_size;
  if (copies.any_magic && copies.bodies.empty() && !vol.header().rekeying) {
    // The first write of the record was cut short: the header was never marked, so no chunk has
    // changed. Start again.
    log::warning(label + ": a re-key record that was never completed (" + copies.damage + ") is discarded");
    clear_volume_rekey(vol.fd(), label);
    copies = VolumeRekeyCopies{};
  }
  if (copies.any_magic) {
    if (!copies.damage.empty()) log::warning(label + ": " + copies.damage + " (using the other copy)");
    o = open_volume_rekey(copies, unlocked_master, label);
    result.resumed = true;
    // A stop right after the record was written can leave the header unmarked: mark it before
    // any chunk changes again.
    const bool pass_left = !o.old_master.empty() && o.record.progress.done_chunks < total;
    bool all_marked = true;
    for (const auto& copy : vol.header().copies) all_marked = all_marked && copy.rekeying;
    if (pass_left && (!all_marked || vol.header().copies.size() < kVolumeSlots)) vol.replace_config(vol.config(), true);
  } else if (vol.header().rekeying) {
    throw CorruptData("the header of " + label + " says a re-key is in progress, but its re-key record is gone: "
                      "the container is left as it is");
  } else {
    o = start(vol, unlocked_master, make_plan, segment_bytes, &copies);
  }
  VolumeRekeyRecord& rec = o.record;
  const VaultConfig& c = rec.next;
  result.volume_bytes = c.volume_size;
  if (!o.old_master.empty()) {
    const FileId id = vol.check_content_header().id;
    const KeyRing old_ring(o.old_master), new_ring(o.new_master);
    const ChunkKey old_key = old_ring.content_key(id), new_key = new_ring.content_key(id);
    StreamRekeyPass pass(vol.fd(), vol.layout(), total, StreamRekeyKeys{&old_key, &new_key, id}, engine, label,
                         rec.segment_chunks);
    auto persist = [&](const StreamRekeyProgress& p) {
      rec.progress = p;
      write_volume_rekey(vol.fd(), label, rec, o.new_master, &copies);
    };
    result.stats = pass.run(rec.progress, persist, report);
    if (!result.stats.damaged.empty())
      log::warning(label + ": " + std::to_string(result.stats.damaged.size()) +
                   " chunks opened under neither key and were left as they were (damage from before the re-key; "
                   "they read as errors): chunks " + describe_chunk_runs(result.stats.damaged, 8));
  }
  // A header that opens with the new key was written only after the pass was done and recorded;
  // an older copy of the record (the newest torn while it was being wiped) may still say less.
  // The new header in both copies (unmarked), then the backups cut off, then the record wiped.
  vol.replace_config(c, false);
  if (::ftruncate(vol.fd(), static_cast<off_t>(stream_end(vol, c))) != 0 || ::fsync(vol.fd()) != 0)
    throw UserError("cannot cut the re-key's backup areas off " + label + ": " + std::strerror(errno));
  clear_volume_rekey(vol.fd(), label);
  result.new_master = std::move(o.new_master);
  return result;
}

}  // namespace gcfs
