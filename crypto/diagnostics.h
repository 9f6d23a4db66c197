// How the lower layers (crypto/, cuda/) say what they notice (a GPU that failed, an engine member
// retired, a trace asked for) without depending on the daemon's log above them: they write here,
// and whoever owns a log installs a sink that forwards to it. fs/log.cc installs one as the
// program starts, so in a binary with the daemon's log these messages end up in that log (its
// file, syslog or stderr). Until a sink is installed, and in programs without one, each message is
// one line on stderr: "gpucryptfs: MESSAGE".
#pragma once

#include <string_view>

namespace gcfs::diag {

enum class Level { Debug, Info, Warning, Error };

using Sink = void (*)(Level level, std::string_view message);
// Installs sink for every later message (nullptr: stderr again). Safe to call from any thread.
void set_sink(Sink sink);

void write(Level level, std::string_view message);
inline void debug(std::string_view m) { write(Level::Debug, m); }
inline void info(std::string_view m) { write(Level::Info, m); }
inline void warning(std::string_view m) { write(Level::Warning, m); }
inline void error(std::string_view m) { write(Level::Error, m); }

}  // namespace gcfs::diag
