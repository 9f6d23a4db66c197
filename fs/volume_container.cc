#include "fs/volume_container.h"

#include <fcntl.h>
#include <openssl/evp.h>
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
#include "fs/content_file.h"
#include "fs/file_header.h"
#include "fs/file_lock.h"
#include "fs/log.h"

namespace gcfs {
namespace {

// Slot: magic (8) | be64 generation | be32 JSON length | JSON | SHA-256 of everything before it.
constexpr std::size_t kSlotFixedBytes = sizeof(kVolumeMagic) + 8 + 4;
constexpr std::size_t kSlotDigestBytes = 32;
constexpr std::size_t kMaxSlotJson = kVolumeSlotBytes - kSlotFixedBytes - kSlotDigestBytes;

std::array<std::uint8_t, kSlotDigestBytes> sha256(const std::uint8_t* p, std::size_t n) {
  std::array<std::uint8_t, kSlotDigestBytes> d{};
  unsigned int len = 0;
  if (EVP_Digest(p, n, d.data(), &len, EVP_sha256(), nullptr) != 1 || len != d.size())
    throw std::runtime_error("SHA-256 failed in OpenSSL");
  return d;
}

void put_be(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}
std::uint64_t get_be(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

std::vector<std::uint8_t> encode_slot(const VaultConfig& c, std::uint64_t generation) {
  const std::string json = c.to_json();
  if (json.size() > kMaxSlotJson) throw std::runtime_error("volume config does not fit its 4 KiB slot");
  std::vector<std::uint8_t> slot(kVolumeSlotBytes, 0);
  std::memcpy(slot.data(), kVolumeMagic, sizeof(kVolumeMagic));
  put_be(slot.data() + 8, generation, 8);
  put_be(slot.data() + 16, json.size(), 4);
  std::memcpy(slot.data() + kSlotFixedBytes, json.data(), json.size());
  const std::size_t body = kSlotFixedBytes + json.size();
  auto d = sha256(slot.data(), body);
  std::memcpy(slot.data() + body, d.data(), d.size());
  return slot;
}

struct DecodedSlot {
  VaultConfig config;
  std::uint64_t generation = 0;
};

enum class SlotState { Empty, Damaged, Valid };

// Empty: no magic (never written, or not a container). Damaged: magic present but the checksum
// or the JSON is wrong; *why says which.
SlotState decode_slot(const std::uint8_t* slot, DecodedSlot* out, std::string* why) {
  if (std::memcmp(slot, kVolumeMagic, sizeof(kVolumeMagic)) != 0) return SlotState::Empty;
  const std::uint64_t len = get_be(slot + 16, 4);
  if (len > kMaxSlotJson) {
    *why = "its length field is impossible";
    return SlotState::Damaged;
  }
  const std::size_t body = kSlotFixedBytes + len;
  if (sha256(slot, body) != *reinterpret_cast<const std::array<std::uint8_t, kSlotDigestBytes>*>(slot + body)) {
    *why = "its checksum does not match";
    return SlotState::Damaged;
  }
  try {
    out->config = VaultConfig::from_json(std::string_view(reinterpret_cast<const char*>(slot + kSlotFixedBytes), len));
  } catch (const CorruptData& e) {
    *why = e.what();
    return SlotState::Damaged;
  }
  if (out->config.kind != VaultKind::Volume) {
    *why = "its config is not of kind 'volume'";
    return SlotState::Damaged;
  }
  out->generation = get_be(slot + 8, 8);
  return SlotState::Valid;
}

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
      auto slot = encode_slot(config, 1);
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

VolumeContainer::VolumeContainer(const std::string& path, bool writable) : path_(path) {
  fd_ = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd_ < 0) throw UserError("cannot open the volume container " + path + ": " + errno_text());
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw UserError("cannot stat " + path + ": " + errno_text());
    if (!S_ISREG(st.st_mode)) throw UserError(path + " is not a regular file, so not a volume container");
    if (const int e = flock_with_grace(fd_, writable ? LOCK_EX : LOCK_SH); e != 0) {
      if (e == EWOULDBLOCK)
        throw UserError(path + " is in use by another gpucryptfs (mounted? unmount it first)");
      throw UserError("cannot lock " + path + ": " + std::strerror(e));
    }
    std::vector<std::uint8_t> block(kVolumeSlots * kVolumeSlotBytes, 0);
    ssize_t n = pread_full(fd_, block.data(), block.size(), 0);
    if (n < 0) throw UserError("cannot read " + path + ": " + std::strerror(static_cast<int>(-n)));
    std::optional<DecodedSlot> best;
    std::string problems;
    int empty = 0;
    for (int s = 0; s < kVolumeSlots; ++s) {
      DecodedSlot d;
      std::string why;
      switch (decode_slot(block.data() + s * kVolumeSlotBytes, &d, &why)) {
        case SlotState::Empty: ++empty; break;
        case SlotState::Damaged:
          problems += (problems.empty() ? "" : "; ") + std::string("copy ") + std::to_string(s) + ": " + why;
          break;
        case SlotState::Valid:
          if (!best || d.generation > best->generation) {
            best = std::move(d);
            slot_ = s;
          }
          break;
      }
    }
    if (!best && empty == kVolumeSlots)
      throw CorruptData(path + " is not a gpucryptfs volume container (no volume header found)");
    if (!best)
      throw CorruptData("the header of volume container " + path + " is corrupt (" + problems + ")");
    if (!problems.empty())
      log::warning(path + ": one copy of the volume header is damaged (" + problems + "); using the other");
    config_ = std::move(best->config);
    generation_ = best->generation;
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

VolumeContainer::VolumeContainer(VolumeContainer&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), config_(std::move(o.config_)), generation_(o.generation_), slot_(o.slot_) {
  o.fd_ = -1;
}

VolumeContainer::~VolumeContainer() {
  if (fd_ >= 0) ::close(fd_);
}

void VolumeContainer::check_stream_size() {
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
  log::warning(path_ + ": rolling back an interrupted resize (cutting the container back to its configured size)");
  if (::ftruncate(fd_, static_cast<off_t>(want)) != 0) throw UserError("cannot truncate " + path_ + ": " + errno_text());
}

void VolumeContainer::check_content_header() const {
  std::array<std::uint8_t, kFileHeaderBytes> bytes{};
  ssize_t n = pread_full(fd_, bytes.data(), bytes.size(), kVolumeConfigBlockBytes);
  if (n < 0) throw UserError("cannot read " + path_ + ": " + std::strerror(static_cast<int>(-n)));
  if (static_cast<std::size_t>(n) != bytes.size() || !FileHeader::decode(bytes))
    throw CorruptData("the content header of volume container " + path_ + " (at byte " +
                      std::to_string(kVolumeConfigBlockBytes) +
                      ") is corrupt: wrong magic or version, so no chunk of the volume could be read");
}

void VolumeContainer::write_slot(const VaultConfig& config) {
  const int target = 1 - slot_;  // the older copy; the newest stays intact until this one is durable
  auto slot = encode_slot(config, generation_ + 1);
  pwrite_or_throw(fd_, slot.data(), slot.size(), target * kVolumeSlotBytes, path_);
  if (::fdatasync(fd_) != 0) throw UserError("cannot sync " + path_ + ": " + errno_text());
  config_ = config;
  generation_ += 1;
  slot_ = target;
}

void VolumeContainer::grow(std::uint64_t new_size, std::string_view password) {
  if (new_size < config_.volume_size)
    throw UserError("cannot shrink a volume (from " + std::to_string(config_.volume_size) + " to " +
                    std::to_string(new_size) +
                    " bytes): the filesystem inside may use the end; only growing is supported");
  if (new_size % config_.chunk_size != 0)
    throw std::invalid_argument("VolumeContainer::grow: size must be whole chunks");
  check_stream_size();
  VaultConfig next = config_;
  SecretBytes master = next.unlock(password);  // throws WrongPassword
  if (new_size == config_.volume_size) return;
  next.volume_size = new_size;
  next.rewrap(master, password);
  const std::uint64_t total = kVolumeConfigBlockBytes + layout().cipher_size(new_size);
  if (::ftruncate(fd_, static_cast<off_t>(total)) != 0)
    throw UserError("cannot grow " + path_ + " to " + std::to_string(total) + " bytes: " + errno_text());
  if (::fsync(fd_) != 0) throw UserError("cannot sync " + path_ + ": " + errno_text());
  write_slot(next);
}

}  // namespace gcfs
