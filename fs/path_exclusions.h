// Which plaintext paths reverse mode leaves out of its view (mount --reverse --exclude,
// --exclude-wildcard, --exclude-from), with gitignore's rules (gitignore(5)), as gocryptfs has them:
//   - blank lines and lines starting with '#' are nothing; "\#" and "\!" start a pattern with
//     that character; trailing spaces are dropped unless escaped ("\ ");
//   - '!' in front re-includes what an earlier pattern excluded (the last matching line wins), but
//     never below an excluded directory, which the view does not enter at all;
//   - a trailing '/' matches directories only;
//   - a pattern with a '/' at its start or in its middle is anchored at PLAINDIR's root (the
//     leading '/' dropped); one without matches the name at any depth;
//   - '*', '?' and '[...]' match within one name (fnmatch(3)); "**" as a whole component matches
//     any number of directories ("**/x", "a/**/b"), and a trailing "/**" everything inside.
// --exclude PATH is the one path, taken literally (no pattern characters), leading slash optional.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gcfs {

class PathExclusions {
 public:
  // --exclude PATH: false for a path that names nothing below the root ("", "/", "..").
  bool add_path(std::string_view rel);
  // One gitignore line (--exclude-wildcard, or a line of --exclude-from).
  void add_pattern(std::string_view line);
  // An --exclude-from file's content, one gitignore line each.
  void add_lines(std::string_view text);
  bool empty() const { return rules_.empty(); }
  // rel: the path below PLAINDIR, "a/b/c"; is_dir: whether it is a directory.
  bool excluded(std::string_view rel, bool is_dir) const;

 private:
  struct Rule {
    std::vector<std::string> segments;  // the pattern split at '/'
    bool negate = false;
    bool dir_only = false;
    bool anchored = false;
  };
  static bool match(const std::vector<std::string>& pat, std::size_t pi, const std::vector<std::string_view>& path,
                    std::size_t si);
  std::vector<Rule> rules_;
};

}  // namespace gcfs
