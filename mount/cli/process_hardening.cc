// What every gpucryptfs process does first, before any secret (process_hardening.h).
#include "mount/cli/process_hardening.h"

#include <sys/prctl.h>
#include <sys/resource.h>

namespace gcfs::cli {

bool harden_process() {
  bool ok = ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0;
  // Also no core file at all, should something make the process dumpable again (an exec).
  const rlimit none{0, 0};
  ok = ::setrlimit(RLIMIT_CORE, &none) == 0 && ok;
  return ok;
}

}  // namespace gcfs::cli
