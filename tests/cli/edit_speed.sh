#!/usr/bin/env bash
# edit on the shipped model in under 3 s of wall-clock time, the CPU time printed beside it.
#   edit_speed.sh FFN_TRACE CAPITALS_DIR WORK_DIR
set -u
ft=$1 capitals=$2 out=$3
rm -rf "$out"
TIMEFORMAT='%R %U %S'
if ! t=$( { time "$ft" edit --checkpoint "$capitals" --layer 0 --prompt "The capital of France is" --subject France \
  --target " Rome" --at last -o "$out" >/dev/null 2>/dev/null; } 2>&1 ); then
  echo "FAILED: edit failed"
  exit 1
fi
read -r real user sys <<<"$t"
echo "edit on capitals: ${real} s wall, ${user} s user, ${sys} s system"
awk -v r="$real" 'BEGIN { exit !(r < 3) }' || { echo "FAILED: over 3 s"; exit 1; }
