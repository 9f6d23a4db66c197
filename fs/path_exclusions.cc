// gitignore-style exclusions for reverse mode (path_exclusions.h).
#include "fs/path_exclusions.h"

#include <fnmatch.h>

namespace gcfs {
namespace {

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = s.find('/', start);
    const std::string_view part = s.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (!part.empty()) out.push_back(part);
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

// The line without its unescaped trailing spaces (and a CR left by a file from Windows).
std::string_view trim_trailing(std::string_view line) {
  if (line.ends_with('\r')) line.remove_suffix(1);
  while (line.ends_with(' ')) {
    std::size_t backslashes = 0;
    for (std::size_t i = line.size() - 1; i-- > 0 && line[i] == '\\';) ++backslashes;
    if (backslashes % 2 == 1) break;  // "\ " keeps its space
    line.remove_suffix(1);
  }
  return line;
}

}  // namespace

bool PathExclusions::add_path(std::string_view rel) {
  const auto parts = split(rel);
  if (parts.empty()) return false;
  Rule r;
  r.anchored = true;
  for (auto p : parts) {
    if (p == "." || p == "..") return false;
    std::string lit;
    for (char c : p) {
      if (c == '*' || c == '?' || c == '[' || c == '\\') lit += '\\';
      lit += c;
    }
    r.segments.push_back(std::move(lit));
  }
  rules_.push_back(std::move(r));
  return true;
}

void PathExclusions::add_pattern(std::string_view line) {
  line = trim_trailing(line);
  if (line.empty() || line.starts_with('#')) return;
  Rule r;
  if (line.starts_with('!')) {
    r.negate = true;
    line.remove_prefix(1);
  } else if (line.starts_with("\\!") || line.starts_with("\\#")) {
    line.remove_prefix(1);
  }
  if (line.ends_with('/')) {
    r.dir_only = true;
    while (line.ends_with('/')) line.remove_suffix(1);
  }
  // A slash left at the start or in the middle anchors the pattern.
  r.anchored = line.find('/') != std::string_view::npos;
  for (auto p : split(line)) r.segments.emplace_back(p);
  if (r.segments.empty()) return;
  rules_.push_back(std::move(r));
}

void PathExclusions::add_lines(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    add_pattern(text.substr(start, nl - start));
    start = nl + 1;
  }
}

bool PathExclusions::match(const std::vector<std::string>& pat, std::size_t pi, const std::vector<std::string_view>& path,
                           std::size_t si) {
  for (; pi < pat.size(); ++pi, ++si) {
    if (pat[pi] == "**") {
      // A trailing "**" matches what is inside, at least one more name; elsewhere any number.
      if (pi + 1 == pat.size()) return si < path.size();
      for (std::size_t k = si; k <= path.size(); ++k)
        if (match(pat, pi + 1, path, k)) return true;
      return false;
    }
    if (si >= path.size()) return false;
    const std::string name(path[si]);
    if (::fnmatch(pat[pi].c_str(), name.c_str(), 0) != 0) return false;
  }
  return si == path.size();
}

bool PathExclusions::excluded(std::string_view rel, bool is_dir) const {
  const auto path = split(rel);
  if (path.empty()) return false;  // the root is never left out
  bool out = false;
  for (const auto& r : rules_) {
    if (r.dir_only && !is_dir) continue;
    if (r.negate == out) {  // only a rule that would change the answer needs matching
      const bool hit = r.anchored ? match(r.segments, 0, path, 0)
                                  // Unanchored: the name at any depth, a pattern of one name.
                                  : (r.segments.size() == 1 && match(r.segments, 0, {path.back()}, 0));
      if (hit) out = !r.negate;
    }
  }
  return out;
}

}  // namespace gcfs
