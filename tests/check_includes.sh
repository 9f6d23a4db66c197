#!/bin/sh
# The layering tests (tests/CMakeLists.txt, "Layering.*"): fails, printing each offending line, when
# a source file under one of the folders includes what the README's layering forbids there.
#
#   check_includes.sh FORBIDDEN ALLOWED FOLDER...
#
# FORBIDDEN is an extended regular expression for what follows "#include" (delimiter included:
# '<fuse_lowlevel\.h>', '"mount/'); ALLOWED (may be empty) exempts includes that match it. Folders
# are searched recursively, so a rule keeps holding as files move into subfolders; a folder that
# does not exist fails the test rather than passing it unchecked.
forbidden=$1
allowed=$2
shift 2
for dir in "$@"; do
  if [ ! -d "$dir" ]; then
    echo "no such folder: $dir" >&2
    exit 2
  fi
done
directive='[[:space:]]*#[[:space:]]*include[[:space:]]*'
found=$(grep -rnE "^${directive}(${forbidden})" "$@")
if [ -n "$allowed" ] && [ -n "$found" ]; then  # grep -n prints FILE:LINE:TEXT
  found=$(printf '%s\n' "$found" | grep -vE ":[0-9]+:${directive}(${allowed})")
fi
if [ -n "$found" ]; then
  printf 'forbidden here:\n%s\n' "$found"
  exit 1
fi
exit 0
