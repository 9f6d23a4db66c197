#!/bin/bash
# Installs what building and testing gpucryptfs needs on Debian 12, as root, with apt-get.
# Quiet and quick when everything is already there. nvcc is optional: with it (the CUDA Toolkit
# at /usr/local/cuda) the gpu engine is built too.
set -euo pipefail
packages=(
  build-essential cmake pkg-config git
  libssl-dev libfuse3-dev fuse3 libboost-program-options-dev nlohmann-json3-dev liburing-dev
  libgtest-dev googletest libbenchmark-dev
  sqlite3 rsync attr acl libcap2-bin e2fsprogs gnuplot-nox clang libclang-rt-14-dev kmod perl
)
# intel-ipsec-mb, the cpu engine's faster AES-256-GCM, is packaged for amd64 only; elsewhere the
# build uses OpenSSL alone.
[[ $(dpkg --print-architecture 2>/dev/null) == amd64 ]] && packages+=(libipsec-mb-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "install_deps: missing packages (${missing[*]}); run as root or install them" >&2
    exit 1
  fi
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# FUSE needs its device node; containers sometimes lack the module loaded.
[[ -e /dev/fuse ]] || modprobe fuse 2>/dev/null || true
