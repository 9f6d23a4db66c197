// One mount's line of /proc/self/mountinfo, found by its mount ID (mount_table.h).
#include "mount/lifecycle/mount_table.h"

#include <fstream>
#include <sstream>

namespace gcfs::mount {

std::string unescape_mountinfo(const std::string& s) {
  std::string out;
  const auto octal = [&](std::size_t k) { return s[k] >= '0' && s[k] <= '7'; };
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<MountEntry> find_mount(int mount_id, bool* readable) {
  std::ifstream in("/proc/self/mountinfo");
  if (readable) *readable = in.is_open();
  std::string line;
  while (std::getline(in, line)) {
    // ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL FIELDS...] - FSTYPE SOURCE SUPEROPTIONS
    std::istringstream fields(line);
    MountEntry e;
    std::string root, point;
    if (!(fields >> e.id >> e.parent >> e.device >> root >> point) || e.id != mount_id) continue;
    e.mountpoint = unescape_mountinfo(point);
    const auto dash = line.find(" - ");
    if (dash != std::string::npos) {
      std::istringstream tail(line.substr(dash + 3));
      std::string source;
      tail >> e.fstype >> source;
      e.source = unescape_mountinfo(source);
    }
    return e;
  }
  return std::nullopt;
}

}  // namespace gcfs::mount
