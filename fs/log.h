// The daemon's log. Problems the kernel can only report as an errno (a chunk that failed
// authentication, a corrupt header) are written here with the file they concern, so the user can
// find out what an EIO meant. Goes to stderr in the foreground, to syslog once daemonized, or to a
// file given with --log.
#pragma once

#include <string>
#include <string_view>

namespace gcfs::log {

enum class Level { Debug, Info, Warning, Error };

void to_stderr();
void to_syslog();
// Where a daemon that detaches without --log writes: syslog when a syslog daemon listens on
// /dev/log; otherwise (containers, minimal systems) a file in the user's state directory,
// $XDG_STATE_HOME/gpucryptfs/gpucryptfs.log or ~/.local/state/gpucryptfs/gpucryptfs.log, so that
// damage reports never vanish. Returns "" for syslog, else the file's path.
std::string to_syslog_or_state_file();
// Appends to path; throws UserError if it cannot be opened.
void to_file(const std::string& path);
void set_min_level(Level level);
// While on, warnings and errors sent to syslog or a file are also printed on stderr: a mount
// that is still attached to its terminal says there what it found while unlocking (a damaged
// header copy, a journal it recovered from) instead of only in a log the user may never read.
void echo_warnings_to_stderr(bool on);

void write(Level level, std::string_view message);
inline void debug(std::string_view m) { write(Level::Debug, m); }
inline void info(std::string_view m) { write(Level::Info, m); }
inline void warning(std::string_view m) { write(Level::Warning, m); }
inline void error(std::string_view m) { write(Level::Error, m); }

}  // namespace gcfs::log
