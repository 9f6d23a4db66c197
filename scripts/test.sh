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
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
(cd "$build" && ctest --output-on-failure --timeout 600 -j2) | tee "$summary"
# The .deb built, installed with dpkg -i and used (root only; it removes the package again).
"$root/scripts/test_package.sh"
if [[ ${GPUCRYPTFS_QUICK_TESTS:-0} != 1 ]]; then
  [[ -x "$root/scripts/sanitize.sh" ]] && "$root/scripts/sanitize.sh"
  [[ -x "$root/scripts/fuzz.sh" ]] && "$root/scripts/fuzz.sh"
fi
# One closing line for whoever reads the log last: ctest's counts, skipped tests apart (they are
# the GPU tests on a machine without a GPU, each with its reason above).
total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$summary" | tail -n 1)
failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p' "$summary" | tail -n 1)
skipped=$(grep -c '\*\*\*Skipped' "$summary" || true)
echo "ctest: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
