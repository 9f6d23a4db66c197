#include "fs/posix_acl.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

namespace gcfs {
namespace {

constexpr std::uint32_t kVersion = 2;
constexpr std::size_t kHeader = 4, kEntry = 8;

std::uint32_t le32(const std::uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<std::uint32_t>(p[3]) << 24; }
std::uint16_t le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }
void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
}

}  // namespace

std::optional<PosixAcl> PosixAcl::parse(std::span<const std::uint8_t> value) {
  if (value.size() < kHeader || (value.size() - kHeader) % kEntry != 0 || le32(value.data()) != kVersion)
    return std::nullopt;
  PosixAcl acl;
  int user_obj = 0, group_obj = 0, other = 0, mask = 0, named = 0;
  for (std::size_t off = kHeader; off < value.size(); off += kEntry) {
    AclEntry e{le16(value.data() + off), le16(value.data() + off + 2), le32(value.data() + off + 4)};
    if (e.perm & ~7u) return std::nullopt;
    switch (e.tag) {
      case kUserObj: ++user_obj; break;
      case kGroupObj: ++group_obj; break;
      case kOther: ++other; break;
      case kMask: ++mask; break;
      case kUser:
      case kGroup: ++named; break;
      default: return std::nullopt;
    }
    acl.entries_.push_back(e);
  }
  if (user_obj != 1 || group_obj != 1 || other != 1 || mask > 1 || (named && !mask)) return std::nullopt;
  return acl;
}

std::vector<std::uint8_t> PosixAcl::serialize() const {
  std::vector<std::uint8_t> out;
  out.reserve(kHeader + kEntry * entries_.size());
  put32(out, kVersion);
  for (const AclEntry& e : entries_) {
    put16(out, e.tag);
    put16(out, e.perm);
    put32(out, e.id);
  }
  return out;
}

AclEntry* PosixAcl::find(std::uint16_t tag) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const AclEntry& e) { return e.tag == tag; });
  return it == entries_.end() ? nullptr : &*it;
}

mode_t PosixAcl::permission_bits() const {
  mode_t mode = 0;
  bool masked = false;
  for (const AclEntry& e : entries_) {
    if (e.tag == kUserObj) mode |= (e.perm & 7u) << 6;
    else if (e.tag == kOther) mode |= e.perm & 7u;
    else if (e.tag == kMask) masked = true;
  }
  // The group bits show the mask where there is one, else the owning group's entry.
  for (const AclEntry& e : entries_)
    if (e.tag == (masked ? kMask : kGroupObj)) mode |= (e.perm & 7u) << 3;
  return mode;
}

bool PosixAcl::equivalent_to_mode() const {
  return std::all_of(entries_.begin(), entries_.end(),
                     [](const AclEntry& e) { return e.tag == kUserObj || e.tag == kGroupObj || e.tag == kOther; });
}

void PosixAcl::apply_chmod(mode_t mode) {
  if (AclEntry* u = find(kUserObj)) u->perm = (mode & S_IRWXU) >> 6;
  if (AclEntry* o = find(kOther)) o->perm = mode & S_IRWXO;
  AclEntry* g = find(kMask);
  if (!g) g = find(kGroupObj);
  if (g) g->perm = (mode & S_IRWXG) >> 3;
}

PosixAcl PosixAcl::inherit_for_new_entry(mode_t* mode_p) const {
  PosixAcl acl = *this;
  mode_t mode = *mode_p;
  if (AclEntry* u = acl.find(kUserObj)) {
    u->perm &= (mode >> 6) & 7u;
    mode &= (static_cast<mode_t>(u->perm) << 6) | ~S_IRWXU;
  }
  if (AclEntry* o = acl.find(kOther)) {
    o->perm &= mode & 7u;
    mode &= o->perm | ~S_IRWXO;
  }
  AclEntry* g = acl.find(kMask);
  if (!g) g = acl.find(kGroupObj);
  if (g) {
    g->perm &= (mode >> 3) & 7u;
    mode &= (static_cast<mode_t>(g->perm) << 3) | ~S_IRWXG;
  }
  *mode_p = mode;
  return acl;
}

}  // namespace gcfs
