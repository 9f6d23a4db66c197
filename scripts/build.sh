#!/bin/bash
# Configures and builds gpucryptfs into build/ (or $BUILD_DIR). Extra arguments go to cmake.
# BUILD_TARGETS: build only these targets (the demo needs just the binary, not the test suite).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
# shellcheck disable=SC2086  # a list of target names
cmake --build "$build" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
