#!/bin/sh
# The house rule "no source file over 800 lines" (tests/CMakeLists.txt, "Layout.*"): fails, naming
# each file and its length, when a C++ or CUDA source under one of the folders is longer than LIMIT.
# A file that outgrows the limit is a file with more than one job: split it by concept.
#
#   check_file_sizes.sh LIMIT FOLDER...
limit=$1
shift
status=0
for dir in "$@"; do
  if [ ! -d "$dir" ]; then
    echo "no such folder: $dir" >&2
    exit 2
  fi
done
for f in $(find "$@" -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort); do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$limit" ]; then
    echo "$f: $n lines (limit $limit)"
    status=1
  fi
done
exit $status
