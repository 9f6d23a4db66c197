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
uring_switch=/sys/module/fuse/parameters/enable_uring
uring_before=
restore_uring() {
  # Puts the kernel's io_uring switch back as this script found it (also when a test fails).
  [[ -n $uring_before ]] && echo "$uring_before" > "$uring_switch" 2>/dev/null || true
  uring_before=
}
trap 'restore_uring; rm -f "$summary"' EXIT
# First pass: everything, mounts over /dev/fuse.
(cd "$build" && GPUCRYPTFS_TEST_TRANSPORT=classic ctest --output-on-failure --timeout 600 -j2) | tee "$summary"
# Second pass: the suites that mount (label "mounted"), over FUSE's io_uring transport, which
# the kernel (6.14 and later) offers only while root has it switched on. --transport uring makes
# a mount that cannot have it fail instead of falling back.
if [[ ! -e $uring_switch ]]; then
  echo "io_uring pass skipped: this kernel has no FUSE over io_uring ($uring_switch is missing; Linux 6.14+)"
elif [[ ! -w $uring_switch ]]; then
  echo "io_uring pass skipped: $uring_switch is not writable (run as root)"
else
  uring_before=$(cat "$uring_switch")
  [[ $uring_before == Y || $uring_before == 1 ]] && uring_before=1 || uring_before=0
  echo 1 > "$uring_switch"
  (cd "$build" && GPUCRYPTFS_TEST_TRANSPORT=uring ctest -L mounted --output-on-failure --timeout 600 -j2) | tee -a "$summary"
  restore_uring
fi
# The .deb built, installed with dpkg -i and used (root only; it removes the package again).
"$root/scripts/test_package.sh"
if [[ ${GPUCRYPTFS_QUICK_TESTS:-0} != 1 ]]; then
  [[ -x "$root/scripts/sanitize.sh" ]] && "$root/scripts/sanitize.sh"
  [[ -x "$root/scripts/fuzz.sh" ]] && "$root/scripts/fuzz.sh"
fi
# One closing line for whoever reads the log last: ctest's counts over both passes, skipped tests
# apart (the GPU tests on a machine without a GPU, each with its reason above).
total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$summary" | awk '{s += $1} END {print s + 0}')
failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p' "$summary" | awk '{s += $1} END {print s + 0}')
skipped=$(grep -c '\*\*\*Skipped' "$summary" || true)
echo "ctest: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
