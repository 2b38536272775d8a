#!/usr/bin/env bash
# Runs a command and compares its stdout with a checked-in golden file.
#
#   golden.sh GOLDEN_FILE -- COMMAND [ARGS...]
#
# With FFN_TRACE_UPDATE_GOLDEN=1 it rewrites the golden file instead: read every line of the
# new file against the documents before committing it.
set -u
golden=$1
shift
[ "$1" = "--" ] && shift
actual=$(mktemp)
trap 'rm -f "$actual"' EXIT
env -u COLUMNS "$@" >"$actual" 2>&1 </dev/null
status=$?
if [ "$status" -ne 0 ]; then
    echo "FAILED: exit status $status from: $*"
    cat "$actual"
    exit 1
fi
if [ "${FFN_TRACE_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$actual" "$golden"
    echo "updated $golden"
    exit 0
fi
diff -u "$golden" "$actual" || { echo "FAILED: output differs from $golden"; exit 1; }
