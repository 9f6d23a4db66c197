#include "fs/volume_container.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "crypto/errors.h"
#include "fs/plain_io.h"
#include "fs/chunk_auth.h"
#include "fs/file_header.h"
#include "fs/framed_block.h"
#include "fs/file_lock.h"
#include "fs/log.h"
#include "fs/safe_open.h"
#include "fs/volume_rekey_record.h"
#include "fs/unique_fd.h"

namespace gcfs {
namespace {

// Slot: a framed block (fs/framed_block.h) whose body is the config's JSON.
constexpr std::size_t kMaxSlotJson = kVolumeSlotBytes - kFramedBlockOverhead;

enum class SlotState { Empty, Damaged, Valid };

// Empty: no magic (never written, or not a container). Damaged: magic present but the checksum
// or the JSON is wrong; *why says which.
SlotState decode_slot(const std::uint8_t* slot, VolumeHeaderCopy* out, std::string* why) {
  FramedBlock b = decode_framed_block({slot, kVolumeSlotBytes}, kVolumeMagic);
  if (b.state == FramedBlock::State::Empty) {
    b = decode_framed_block({slot, kVolumeSlotBytes}, kVolumeRekeyingMagic);
    out->rekeying = true;
  }
  if (b.state == FramedBlock::State::Empty) return SlotState::Empty;
  if (b.state == FramedBlock::State::Damaged) {
    *why = b.why;
    return SlotState::Damaged;
  }
  try {
    out->config = VaultConfig::from_json(b.body);
  } catch (const CorruptData& e) {
    *why = e.what();
    return SlotState::Damaged;
  }
  if (out->config.kind != VaultKind::Volume) {
    *why = "its config is not of kind 'volume'";
    return SlotState::Damaged;
  }
  out->generation = b.generation;
  return SlotState::Valid;
}

std::string copy_name(const VolumeHeaderCopy& c) {
  return "copy " + std::to_string(c.slot) + " (generation " + std::to_string(c.generation) + ")";
}

// A descriptor of the container the user named: symbolic links followed as for any file they
// name, but never blocking (O_NONBLOCK: a FIFO or a device's open returns at once) and nothing
// but a regular file accepted.
int open_container(const std::string& path, bool writable) {
  OpenResult r = open_regular(path, writable ? O_RDWR : O_RDONLY);
  if (r) return r.fd.release();
  if (r.error == EISDIR) throw UserError(path + " is a directory, not a volume container");
  if (r.error == ENXIO) throw UserError(path + " is a FIFO or device with nothing behind it, not a volume container");
  if (r.error == EUCLEAN)
    throw UserError(path + " is a " + file_type_name(r.found_type) + ", not a volume container (a regular file)");
  throw UserError("cannot open the volume container " + path + ": " + std::strerror(r.error));
}

// Reads and decodes the slots of the open container fd; throws CorruptData when no copy is
// valid (naming why), as the constructor documents.
VolumeHeader read_header_at(int fd, const std::string& path) {
  std::vector<std::uint8_t> block(kVolumeSlots * kVolumeSlotBytes, 0);
  ssize_t n = pread_full(fd, block.data(), block.size(), 0);
  if (n < 0) throw UserError("cannot read " + path + ": " + std::strerror(static_cast<int>(-n)));
  VolumeHeader h = decode_volume_header(block);
  if (h.copies.empty() && h.empty == kVolumeSlots)
    throw CorruptData(path + " is not a gpucryptfs volume container (no volume header found)");
  if (h.copies.empty()) throw CorruptData("the header of volume container " + path + " is corrupt (" + h.damage + ")");
  return h;
}

}  // namespace

std::vector<std::uint8_t> encode_volume_slot(const VaultConfig& c, std::uint64_t generation, bool rekeying) {
  const std::string json = c.to_json(c.has_key_slots() ? -1 : 2);
  if (json.size() > kMaxSlotJson)
    throw UserError("the volume's config (" + std::to_string(json.size()) + " bytes with " +
                    std::to_string(c.slots.size()) + " key slots) does not fit its header copy of " +
                    std::to_string(kMaxSlotJson) + " bytes: a volume holds 14 key slots or so, not the 32 of a "
                    "directory vault's config");
  return encode_framed_block(rekeying ? kVolumeRekeyingMagic : kVolumeMagic, generation, json, kVolumeSlotBytes);
}

VolumeHeader decode_volume_header(std::span<const std::uint8_t> block) {
  VolumeHeader h;
  for (int s = 0; s < kVolumeSlots; ++s) {
    const std::size_t off = static_cast<std::size_t>(s) * kVolumeSlotBytes;
    if (block.size() < off + kVolumeSlotBytes) {
      ++h.empty;
      continue;
    }
    VolumeHeaderCopy c;
    std::string why;
    switch (decode_slot(block.data() + off, &c, &why)) {
      case SlotState::Empty: ++h.empty; break;
      case SlotState::Damaged:
        h.damage += (h.damage.empty() ? "" : "; ") + std::string("copy ") + std::to_string(s) + ": " + why;
        break;
      case SlotState::Valid:
        c.slot = s;
        h.rekeying = h.rekeying || c.rekeying;
        h.copies.push_back(std::move(c));
        break;
    }
  }
  std::stable_sort(h.copies.begin(), h.copies.end(),
                   [](const VolumeHeaderCopy& a, const VolumeHeaderCopy& b) { return a.generation > b.generation; });
  return h;
}

namespace {

std::string errno_text() { return std::strerror(errno); }

void pwrite_or_throw(int fd, const void* p, std::size_t n, std::uint64_t off, const std::string& path) {
  ssize_t w = pwrite_full(fd, p, n, off);
  if (w < 0) throw UserError("cannot write " + path + ": " + std::strerror(static_cast<int>(-w)));
}

}  // namespace

std::uint64_t volume_size_for(std::uint64_t requested, std::uint32_t chunk_size) {
  if (requested == 0) throw UserError("a volume needs a size larger than 0");
  const std::uint64_t c = chunk_size;
  if (requested > (std::uint64_t{1} << 60)) throw UserError("volume size is too large (limit: 1 EiB)");
  return (requested + c - 1) / c * c;
}

void VolumeContainer::create(const std::string& path, const VaultConfig& config) {
  if (config.kind != VaultKind::Volume || config.volume_size == 0 || config.volume_size % config.chunk_size != 0)
    throw std::invalid_argument("VolumeContainer::create: config must be a volume of whole chunks");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) throw UserError(path + " already exists; gpucryptfs volume create never overwrites a file");
    throw UserError("cannot create " + path + ": " + errno_text());
  }
  try {
    // Both slots start as the same config, so one damaged slot never loses the volume.
    for (int s = 0; s < kVolumeSlots; ++s) {
      auto slot = encode_volume_slot(config, 1);
      pwrite_or_throw(fd, slot.data(), slot.size(), s * kVolumeSlotBytes, path);
    }
    const FileHeader header = FileHeader::random();
    const auto enc = header.encode();
    pwrite_or_throw(fd, enc.data(), enc.size(), kVolumeConfigBlockBytes, path);
    const ChunkLayout layout(config.chunk_size, kVolumeConfigBlockBytes);
    const std::uint64_t total = kVolumeConfigBlockBytes + layout.cipher_size(config.volume_size);
    if (::ftruncate(fd, static_cast<off_t>(total)) != 0)
      throw UserError("cannot size " + path + " to " + std::to_string(total) + " bytes: " + errno_text() +
                      " (does the filesystem support sparse files this large?)");
    if (::fsync(fd) != 0) throw UserError("cannot sync " + path + ": " + errno_text());
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());
    throw;
  }
  ::close(fd);
}

VolumeContainer::VolumeContainer(const std::string& path, bool writable, bool rekey) : path_(path) {
  fd_ = open_container(path, writable);
  try {
    if (const int e = flock_with_grace(fd_, writable ? LOCK_EX : LOCK_SH); e != 0) {
      if (e == EWOULDBLOCK)
        throw VaultInUse(path + " is in use by another gpucryptfs (mounted? unmount it first)");
      throw UserError("cannot lock " + path + ": " + std::strerror(e));
    }
    header_ = read_header_at(fd_, path);
    if (!rekey && (header_.rekeying || read_volume_rekey_copies(fd_, path).any_magic))
      throw UserError("a re-key of " + path + " is in progress: run 'gpucryptfs volume rekey " + path +
                      "' again to finish it (until then the volume cannot be used)");
    if (!header_.damage.empty())
      log::warning(path + ": one copy of the volume header is damaged (" + header_.damage + "); using the other");
    config_ = header_.copies.front().config;
    generation_ = header_.copies.front().generation;
    slot_ = header_.copies.front().slot;
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

VolumeContainer::VolumeContainer(VolumeContainer&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(o.fd_),
      header_(std::move(o.header_)),
      config_(std::move(o.config_)),
      generation_(o.generation_),
      slot_(o.slot_),
      unlocked_(o.unlocked_),
      clean_(o.clean_) {
  o.fd_ = -1;
}

VolumeContainer::~VolumeContainer() {
  if (fd_ >= 0) ::close(fd_);
}

VolumeHeader VolumeContainer::read_header(const std::string& path) {
  const UniqueFd fd(open_container(path, false));
  return read_header_at(fd.get(), path);
}

void check_kdf_cost(const VolumeHeader& header, KdfPolicy policy) {
  if (policy == KdfPolicy::AllowExpensive) return;
  std::optional<ExpensiveKdf> refused;
  for (const auto& c : header.copies) {
    try {
      c.config.check_kdf_cost(policy);
      return;  // one copy unlock() will try
    } catch (const ExpensiveKdf& e) {
      if (!refused) refused = e;
    }
  }
  if (refused) throw *refused;
}

void VolumeContainer::check_kdf_cost(KdfPolicy policy) const { gcfs::check_kdf_cost(header_, policy); }

SecretBytes VolumeContainer::unlock(std::string_view password, KdfPolicy policy, KeySlotKind kind) {
  std::string passed_over;  // the newer copies not used, and why: for the warning
  bool wrong_password = false;
  std::string wrong_why;
  std::optional<ExpensiveKdf> refused;
  std::optional<CorruptData> edited;
  std::vector<std::string> tried;
  for (std::size_t i = 0; i < header_.copies.size(); ++i) {
    const VolumeHeaderCopy& c = header_.copies[i];
    const std::string json = c.config.to_json();
    if (std::find(tried.begin(), tried.end(), json) != tried.end()) continue;  // same wrap: same answer
    tried.push_back(json);
    SecretBytes master;
    int opened = -1;
    try {
      master = c.config.unlock(password, policy, kind, &opened);
    } catch (const ExpensiveKdf& e) {
      if (!refused) refused = e;
      passed_over += (passed_over.empty() ? "" : "; ") + copy_name(c) + " asks for a scrypt cost above what " +
                     "'volume create' makes and was not tried";
      continue;
    } catch (const WrongPassword& e) {
      wrong_password = true;
      if (wrong_why.empty()) wrong_why = e.what();
      passed_over += (passed_over.empty() ? "" : "; ") + copy_name(c) +
                     " does not open with this " + std::string(key_slot_kind_words(kind)) +
                     " (damaged or forged, or the " + std::string(key_slot_kind_words(kind)) + " is wrong)";
      continue;
    } catch (const CorruptData& e) {
      if (!edited) edited = e;
      passed_over += (passed_over.empty() ? "" : "; ") + copy_name(c) + " does not open: " + e.what();
      continue;
    }
    if (!passed_over.empty())
      log::warning(path_ + ": the newest copy of the volume header was not used: " + passed_over + "; using the older " +
                   copy_name(c) + ", volume size " + std::to_string(c.config.volume_size) + " bytes");
    config_ = c.config;
    generation_ = c.generation;
    slot_ = c.slot;
    opened_slot_ = opened;
    unlocked_ = true;
    clean_ = i == 0 && header_.damage.empty() && header_.empty == 0;
    return master;
  }
  if (edited && !wrong_password) throw *edited;
  if (wrong_password || !refused) {
    std::string msg = header_.copies.front().config.has_key_slots()
                          ? wrong_why
                          : "wrong password (or the volume header's fields were edited: its authentication failed)";
    if (refused) msg += "; " + std::string(refused->what());
    throw WrongPassword(msg);
  }
  throw *refused;
}

void VolumeContainer::check_stream_size() {
  if (!unlocked_) throw std::logic_error("VolumeContainer::check_stream_size before unlock");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw UserError("cannot stat " + path_ + ": " + errno_text());
  const std::uint64_t want = kVolumeConfigBlockBytes + layout().cipher_size(config_.volume_size);
  const std::uint64_t have = static_cast<std::uint64_t>(st.st_size);
  if (have == want) return;
  if (have < want)
    throw CorruptData("volume container " + path_ + " is " + std::to_string(have) + " bytes, shorter than the " +
                      std::to_string(want) + " its volume size needs (a truncated copy?)");
  // Longer: a resize grew the stream but did not get to write the config. Its new chunks were
  // never visible, so cutting them off loses nothing.
  int fl = ::fcntl(fd_, F_GETFL);
  if ((fl & O_ACCMODE) == O_RDONLY) {
    log::warning(path_ + ": the container is longer than its volume size (an interrupted resize); ignoring the excess");
    return;
  }
  if (!clean_) {
    log::warning(path_ + ": the container is longer than its volume size, and the newest copy of the header could "
                 "not be used: the excess may belong to the larger volume it described, so it is left as it is");
    return;
  }
  log::warning(path_ + ": rolling back an interrupted resize (cutting the container back to its configured size)");
  if (::ftruncate(fd_, static_cast<off_t>(want)) != 0) throw UserError("cannot truncate " + path_ + ": " + errno_text());
}

FileHeader VolumeContainer::check_content_header() const {
  std::array<std::uint8_t, kFileHeaderBytes> bytes{};
  ssize_t n = pread_full(fd_, bytes.data(), bytes.size(), kVolumeConfigBlockBytes);
  if (n < 0) throw UserError("cannot read " + path_ + ": " + std::strerror(static_cast<int>(-n)));
  std::optional<FileHeader> h;
  if (static_cast<std::size_t>(n) == bytes.size()) h = FileHeader::decode(bytes);
  if (!h)
    throw CorruptData("the content header of volume container " + path_ + " (at byte " +
                      std::to_string(kVolumeConfigBlockBytes) +
                      ") is corrupt: wrong magic or version, so no chunk of the volume could be read");
  return *h;
}

void VolumeContainer::check_key_opens_data(const KeyRing& keys, ChunkEngine& engine) const {
  constexpr std::uint64_t kSample = 8;  // chunks: enough that one damaged chunk never refuses a volume
  const ChunkLayout l = layout();
  const std::uint64_t total = config_.volume_size / l.chunk_size();
  const off_t data = ::lseek(fd_, static_cast<off_t>(l.disk_offset(0)), SEEK_DATA);
  if (data < 0 || total == 0) return;  // no data at all (ENXIO): nothing to check against
  const FileHeader header = check_content_header();
  const std::uint64_t at = static_cast<std::uint64_t>(data);
  const std::uint64_t first = at <= l.disk_offset(0) ? 0 : (at - l.disk_offset(0)) / l.disk_chunk_size();
  if (first >= total) return;
  const std::uint64_t last = std::min(total, first + kSample) - 1;
  std::vector<std::uint8_t> ct((last - first + 1) * l.disk_chunk_size());
  if (pread_full(fd_, ct.data(), ct.size(), l.disk_offset(first)) != static_cast<ssize_t>(ct.size())) return;
  std::vector<std::uint8_t> scratch;
  std::vector<std::uint64_t> bad;
  const ChunkKey key = keys.content_key(header.id);
  const ChunkRunCheck r =
      check_chunk_run(engine, l, key, header.id, first, last, config_.volume_size, ct.data(), &scratch, &bad);
  if (r.opened > 0 && bad.size() == r.opened)
    throw CorruptData("the key of this header of " + path_ + " opens none of the volume's first written chunks (" +
                      describe_chunk_runs(bad, 4) + "): a copy of the header from before a 'volume rekey', or damage; "
                      "nothing was changed");
}

void VolumeContainer::write_slot(const VaultConfig& config, bool rekeying) {
  // The other copy: older, or the one that failed to open. The one in use stays intact until
  // this one is durable.
  const int target = 1 - slot_;
  if (generation_ == UINT64_MAX) throw CorruptData("the volume header of " + path_ + " is at its last generation");
  auto slot = encode_volume_slot(config, generation_ + 1, rekeying);
  pwrite_or_throw(fd_, slot.data(), slot.size(), target * kVolumeSlotBytes, path_);
  if (::fdatasync(fd_) != 0) throw UserError("cannot sync " + path_ + ": " + errno_text());
  config_ = config;
  generation_ += 1;
  slot_ = target;
  clean_ = true;  // the newest copy now, and the other is the authenticated one it replaced
}

std::uint64_t VolumeContainer::grow(std::uint64_t new_size, std::string_view password, KdfPolicy policy,
                                    KeySlotKind kind) {
  SecretBytes master = unlock(password, policy, kind);  // nothing is acted on before this
  new_size = volume_size_for(new_size, config_.chunk_size);
  if (new_size < config_.volume_size)
    throw UserError("cannot shrink a volume (from " + std::to_string(config_.volume_size) + " to " +
                    std::to_string(new_size) +
                    " bytes): the filesystem inside may use the end; only growing is supported");
  check_stream_size();
  const std::uint64_t old_size = config_.volume_size;
  if (new_size == old_size) return old_size;
  VaultConfig next = config_;
  next.volume_size = new_size;
  if (next.has_key_slots()) next.seal(master);
  else next.rewrap(master, password);
  const std::uint64_t total = kVolumeConfigBlockBytes + layout().cipher_size(new_size);
  if (::ftruncate(fd_, static_cast<off_t>(total)) != 0)
    throw UserError("cannot grow " + path_ + " to " + std::to_string(total) + " bytes: " + errno_text());
  if (::fsync(fd_) != 0) throw UserError("cannot sync " + path_ + ": " + errno_text());
  write_slot(next);
  return old_size;
}

void VolumeContainer::change_password(std::string_view password, std::string_view new_password, KdfPolicy policy,
                                      KeySlotKind kind, KeySlotKind new_kind) {
  SecretBytes master = unlock(password, policy, kind);  // nothing is acted on before this
  VaultConfig next = config_;
  if (!next.has_key_slots() && new_kind == KeySlotKind::KeyFile)
    throw UserError(path_ + " has a config of version 1 (one password, no key slots): a key file needs key slots; "
                    "'gpucryptfs volume keyslot add --new-keyfile' upgrades it and adds one");
  if (next.has_key_slots()) next.rewrap_slot(opened_slot_, master, new_password, new_kind);
  else next.rewrap(master, new_password);
  // A crash between the two writes leaves one copy under each password: the volume still opens,
  // and running passwd again finishes the change.
  write_slot(next);
  write_slot(next);
}

void VolumeContainer::replace_config(const VaultConfig& next, bool rekeying) {
  if (!unlocked_) throw std::logic_error("VolumeContainer::replace_config before unlock");
  (void)encode_volume_slot(next, generation_ + 1);  // too large: refused before either copy changes
  write_slot(next, rekeying);
  write_slot(next, rekeying);
}

}  // namespace gcfs
