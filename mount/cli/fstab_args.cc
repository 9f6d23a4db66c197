// The mount(8) and systemd command line turned into gpucryptfs mount's (fstab_args.h).
#include "mount/cli/fstab_args.h"

#include <sys/stat.h>

#include <boost/program_options/errors.hpp>
#include <cstring>
#include <map>
#include <set>

namespace po = boost::program_options;

namespace gcfs::cli {
namespace {

// name=VALUE options and the mount option each becomes.
const std::map<std::string, std::string> kValueOptions = {
    {"passfile", "--passfile"}, {"extpass", "--extpass"}, {"keyfile", "--keyfile"},
    {"engine", "--engine"},     {"idle", "--idle"},
    {"config", "--config"},     {"log", "--log"},         {"cpu-threads", "--cpu-threads"},
    {"gpu-streams", "--gpu-streams"}, {"masterkey-file", "--masterkey-file"},
    // Their values (auto|uring|classic, auto|direct|buffered) are checked by mount, which names
    // the option and what it takes.
    {"transport", "--transport"}, {"backing-io", "--backing-io"},
    {"badname", "--badname"}, {"ctlsock", "--ctlsock"},
};
// Flags that become mount options.
const std::map<std::string, std::string> kFlagOptions = {
    {"ro", "--read-only"},         {"allow_other", "--allow-other"},          {"nonempty", "--nonempty"},
    {"writeback_cache", "--writeback-cache"},  {"no_writeback_cache", "--no-writeback-cache"},
    {"allow_expensive_kdf", "--allow-expensive-kdf"},
};
// Kernel mount flags that libfuse passes on.
const std::set<std::string> kPassedThrough = {"noexec", "exec", "noatime", "atime", "sync", "async", "dirsync"};
// For mount(8), systemd or the defaults: accepted, nothing to do. dev and suid are here too:
// mount.fuse3 adds them to every line it has not seen nodev or nosuid in, so they say nothing of
// what the line's author wanted; a gpucryptfs mount stays nodev,nosuid (docs/SECURITY.md).
const std::set<std::string> kAccepted = {
    "rw",       "defaults", "auto",     "noauto",   "user",   "nouser",    "users",   "owner", "group",
    "nofail",   "_netdev",  "dev",      "suid",     "nodev",  "nosuid",    "relatime", "norelatime",
    "strictatime", "nodiratime", "diratime", "lazytime", "nolazytime", "default_permissions", "silent", "loud",
};

bool is_ignored_prefix(const std::string& o) {
  return o.starts_with("x-") || o.starts_with("comment=") || o.starts_with("helper=") ||
         o.starts_with("fstype=") || o.starts_with("subtype=") || o.starts_with("fsname=");
}

// Splits an -o value at commas not escaped by a backslash.
std::vector<std::string> split_options(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      cur += s[++i];
    } else if (s[i] == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += s[i];
    }
  }
  out.push_back(cur);
  return out;
}

}  // namespace

bool is_mount_helper_call(int argc, char** argv) {
  if (argc < 1) return false;
  const char* slash = std::strrchr(argv[0], '/');
  const std::string base = slash ? slash + 1 : argv[0];
  if (base.starts_with("mount.")) return true;
  if (argc < 3 || argv[1][0] == '-') return false;
  // A subcommand is never a path, whatever the working directory holds (a folder named "mount").
  for (const char* command : {"init", "mount", "passwd", "keyslot", "info", "fsck", "volume", "bench", "help", "version"})
    if (std::strcmp(argv[1], command) == 0) return false;
  struct stat st {};
  return std::strchr(argv[1], '/') != nullptr || (::stat(argv[1], &st) == 0 && S_ISDIR(st.st_mode));
}

HelperCommand translate_mount_helper_args(const std::vector<std::string>& args) {
  HelperCommand out;
  std::vector<std::string> positional, options, passed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-o" || a == "-t" || a == "-N") {
      if (i + 1 >= args.size()) throw po::error(a + " needs a value");
      if (a == "-o")
        for (auto& o : split_options(args[i + 1])) options.push_back(o);
      // -t fuse.gpucryptfs names us; -N (a namespace) is mount(8)'s to enter.
      ++i;
    } else if (a.starts_with("-o") && a.size() > 2) {
      for (auto& o : split_options(a.substr(2))) options.push_back(o);
    } else if (a == "-n" || a == "-s" || a == "-v" || a == "-w") {
      // no mtab, sloppy, verbose, read-write: nothing to do
    } else if (a == "-r") {
      options.push_back("ro");
    } else if (a == "-f") {
      out.fake = true;
    } else if (!a.empty() && a[0] == '-') {
      throw po::error("unknown flag '" + a + "' in the mount helper's command line");
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2)
    throw po::error("the mount helper's form is 'gpucryptfs CIPHERDIR MOUNTPOINT -o OPTIONS' (got " +
                    std::to_string(positional.size()) + " paths)");
  out.mount.push_back("mount");
  for (const auto& o : options) {
    if (o.empty() || kAccepted.count(o) || is_ignored_prefix(o)) continue;
    const auto eq = o.find('=');
    const std::string name = o.substr(0, eq);
    if (eq != std::string::npos && kValueOptions.count(name)) {
      if (eq + 1 == o.size()) throw po::error("mount option '" + name + "=' needs a value");
      out.mount.push_back(kValueOptions.at(name));
      out.mount.push_back(o.substr(eq + 1));
    } else if (eq == std::string::npos && kFlagOptions.count(o)) {
      out.mount.push_back(kFlagOptions.at(o));
    } else if (eq == std::string::npos && kPassedThrough.count(o)) {
      passed.push_back(o);
    } else if (eq == std::string::npos && kValueOptions.count(o)) {
      throw po::error("mount option '" + o + "' needs a value (" + o + "=...)");
    } else {
      throw po::error("unknown mount option '" + o + "' (docs/USAGE.md, \"/etc/fstab and systemd\", lists those "
                      "gpucryptfs takes)");
    }
  }
  if (!passed.empty()) {
    std::string joined;
    for (const auto& p : passed) joined += (joined.empty() ? "" : ",") + p;
    out.mount.push_back("-o");
    out.mount.push_back(joined);
  }
  out.mount.push_back(positional[0]);
  out.mount.push_back(positional[1]);
  return out;
}

}  // namespace gcfs::cli
