#!/usr/bin/env bash
# Runs a command and checks that no line of its stdout is wider than WIDTH terminal columns.
#
#   fits.sh WIDTH -- COMMAND [ARGS...]
#
# The command gets COLUMNS=WIDTH, as a shell would export it, and no terminal.
set -u
width=$1
shift
[ "$1" = "--" ] && shift
out=$(COLUMNS=$width "$@" </dev/null)
status=$?
if [ "$status" -ne 0 ]; then
    echo "FAILED: exit status $status from: $*"
    exit 1
fi
if [ -z "$out" ]; then
    echo "FAILED: no output from: $*"
    exit 1
fi
widest=$(printf '%s\n' "$out" | LC_ALL=C.UTF-8 wc -L)
if [ "$widest" -gt "$width" ]; then
    echo "FAILED: a line of $widest columns, wider than $width, from: $*"
    printf '%s\n' "$out" | LC_ALL=C.UTF-8 awk -v w="$width" 'length($0) > w'
    exit 1
fi
echo "widest line: $widest of $width columns"
