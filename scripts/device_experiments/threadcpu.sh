#!/bin/bash
# threadcpu.sh PID [SECONDS]: CPU % per thread name over an interval (default 1 s), the top 8
pid=$1; secs=${2:-1}
declare -A a
for t in /proc/$pid/task/*; do id=${t##*/}; read -r -a f < $t/stat 2>/dev/null; a[$id]=$(( ${f[13]} + ${f[14]} )); done
sleep $secs
for t in /proc/$pid/task/*; do id=${t##*/}; read -r -a f < $t/stat 2>/dev/null; c=$(cat $t/comm); now=$(( ${f[13]} + ${f[14]} )); echo "$(( (now - ${a[$id]:-0}) * 100 / secs / 100 )) $c"; done | sort -rn | awk '{s[$2]+=$1; n[$2]++} END {for (k in s) print s[k]"% over "n[k]" threads: "k}' | sort -rn | head -8
