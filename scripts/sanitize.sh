#!/bin/bash
# Sanitizer builds (cpu engine only; CUDA code is not built with sanitizers):
#   address: ASan + UBSan into build-asan/, then the whole ctest suite. The FUSE integration tests
#            mount with the sanitized gpucryptfs, so the daemon runs sanitized too; its reports go
#            to its log and make it exit non-zero, which fails the test.
#   thread:  TSan into build-tsan/, then the tests of concurrent code: thread pool, cpu engine,
#            range lock, ContentFile concurrency, and the concurrent FUSE tests (sanitized daemon),
#            the daemon's descriptor cache (FdCache.*) and file handles (PosixHandles.*) among them.
#
#   scripts/sanitize.sh [address|thread|all]     (default: all)
#
# Each stage takes a few minutes on 2 cores. Set SANITIZE_JOBS to change the build parallelism.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}
jobs=${SANITIZE_JOBS:-$(nproc)}

# Reports must fail the run and name the source line. Every sanitized process, the detached
# daemon included (its stderr goes nowhere), also writes its report to a file under the build
# folder; any such file fails the stage after ctest, and its contents are printed.
sanitizer_env() {  # reports dir
  rm -rf "$1"
  mkdir -p "$1"
  export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:log_path=$1/asan${ASAN_EXTRA:+:$ASAN_EXTRA}"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$1/ubsan"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$1/tsan${TSAN_EXTRA:+:$TSAN_EXTRA}"
}

check_reports() {  # reports dir
  local found=0
  for f in "$1"/*; do
    [[ -s $f ]] || continue
    found=1
    echo "sanitize.sh: sanitizer report $f:" >&2
    head -n 60 "$f" >&2
  done
  return $found
}

configure() {  # build dir, sanitizer
  # -O1 -g1: quicker to compile than the release flags, still fast to run, and reports show lines.
  cmake -S "$root" -B "$1" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" -DCMAKE_C_FLAGS="-O1 -g1" \
    -DGPUCRYPTFS_SANITIZE="$2" -DGPUCRYPTFS_CUDA=OFF >/dev/null
}

# TSan maps its shadow memory at fixed addresses; with the large mmap randomisation of recent
# kernels it can abort with "unexpected memory mapping". Running without ASLR avoids that.
no_aslr() {
  if setarch "$(uname -m)" -R true 2>/dev/null; then setarch "$(uname -m)" -R "$@"; else "$@"; fi
}

# Runs a command in build dir $1 with the mounted tests over FUSE's io_uring transport: the
# kernel switch on meanwhile, then back as it was. Where the switch cannot be turned on, says so
# and succeeds (the pass is skipped).
over_uring() {  # build dir, command...
  local build=$1 switch=/sys/module/fuse/parameters/enable_uring
  shift
  if [[ ! -w $switch ]]; then
    echo "sanitize.sh: io_uring transport not sanitized: $switch is missing or not writable"
    return 0
  fi
  local before rc=0
  before=$(cat "$switch")
  echo 1 > "$switch"
  (cd "$build" && GPUCRYPTFS_TEST_TRANSPORT=uring "$@") || rc=$?
  [[ $before == Y || $before == 1 ]] || echo 0 > "$switch"
  return $rc
}

run_address() {
  local build=$root/build-asan
  echo "sanitize.sh: ASan+UBSan build in $build"
  configure "$build" address
  cmake --build "$build" -j"$jobs" >/dev/null
  echo "sanitize.sh: whole test suite under ASan+UBSan"
  sanitizer_env "$build/sanitizer-reports"
  local rc=0
  (cd "$build" && GPUCRYPTFS_TEST_TRANSPORT=classic ctest --output-on-failure --timeout 600 -j2) || rc=$?
  # The io_uring transport's start, serving and shutdown under ASan too: a few mounted suites
  # (test.sh runs all of them over io_uring unsanitized).
  echo "sanitize.sh: mounted suites over FUSE's io_uring transport under ASan+UBSan"
  over_uring "$build" ctest --output-on-failure --timeout 600 -j2 -L mounted \
    -R 'FsOps|Transport|VolumeMountTest|Concurrency|Programs|FaultMount' || rc=$?
  check_reports "$build/sanitizer-reports" || rc=1
  return $rc
}

run_thread() {
  local build=$root/build-tsan
  echo "sanitize.sh: TSan build in $build"
  configure "$build" thread
  local targets=(gpucryptfs crypto_cpu_engine_test fs_content_file_test fault_mount_test)
  [[ -f $root/tests/fs_range_lock_test.cc ]] && targets+=(fs_range_lock_test)
  [[ -f $root/tests/volume_mount_test.cc ]] && targets+=(volume_mount_test)
  [[ -f $root/tests/integration_concurrency_test.cc ]] && targets+=(integration_concurrency_test)
  [[ -f $root/tests/integration_fd_cache_test.cc ]] && targets+=(integration_fd_cache_test)
  # Lookups of forgotten nodes by handle race the FORGETs that dropped them (PosixHandles.*).
  [[ -f $root/tests/integration_posix_handles_test.cc ]] && targets+=(integration_posix_handles_test)
  cmake --build "$build" -j"$jobs" --target "${targets[@]}" >/dev/null
  echo "sanitize.sh: concurrent tests under TSan"
  sanitizer_env "$build/sanitizer-reports"
  local rc=0
  # -R picks the concurrent tests; the executables of all others were not built.
  (cd "$build" && no_aslr ctest --output-on-failure --timeout 600 -j2 \
    -R 'ThreadPool|CpuEngine\.(Concurrent|ThreadCount)|RangeLock|ContentFileTest\.Concurrent|FaultMount|Parallel|Concurren|FdCache\.|PosixHandles\.') || rc=$?
  # The same concurrent mounted tests over FUSE's io_uring transport, whose serving threads and
  # direct READ and WRITE answers (mount/transport/session_io.h) differ from the /dev/fuse loop's.
  echo "sanitize.sh: concurrent mounted tests over FUSE's io_uring transport under TSan"
  over_uring "$build" no_aslr ctest --output-on-failure --timeout 600 -j2 -L mounted \
    -R 'Parallel|Concurren|FdCache\.|PosixHandles\.' || rc=$?
  check_reports "$build/sanitizer-reports" || rc=1
  return $rc
}

case $what in
  address) run_address ;;
  thread) run_thread ;;
  all) run_address; run_thread ;;
  *) echo "usage: scripts/sanitize.sh [address|thread|all]" >&2; exit 2 ;;
esac
echo "sanitize.sh: $what passed"
