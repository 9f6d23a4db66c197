#!/bin/bash
# The whole test suite, on a fresh Debian 12 machine as root: install what is missing, build,
# run every test with ctest (unit tests and integration tests that mount real FUSE filesystems),
# then the sanitizer builds and the bounded fuzzing runs. GPU tests skip with a reason where no
# GPU is present; the CUDA code is still compiled when nvcc is installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
build=${BUILD_DIR:-$root/build}
(cd "$build" && ctest --output-on-failure --timeout 600 -j2)
if [[ ${GPUCRYPTFS_QUICK_TESTS:-0} != 1 ]]; then
  [[ -x "$root/scripts/sanitize.sh" ]] && "$root/scripts/sanitize.sh"
  [[ -x "$root/scripts/fuzz.sh" ]] && "$root/scripts/fuzz.sh"
fi
echo "all test stages passed"
