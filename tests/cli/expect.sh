#!/usr/bin/env bash
# Runs a command and checks its exit status, stdout and stderr.
#
#   expect.sh STATUS STDOUT STDERR [--stdin FILE] -- COMMAND [ARGS...]
#
# STDOUT and STDERR are each "EMPTY" (nothing may be printed), "ANY", or an extended regular
# expression that must match the stream with its runs of blanks and newlines folded into one
# space ("!REGEX": must not match). In CMake, escape a ";" in a pattern as "\;". When STATUS is 2, stderr must also be exactly one line that starts with "error:".
set -u
status=$1 out_pattern=$2 err_pattern=$3
shift 3
stdin=/dev/null
if [ "$1" = "--stdin" ]; then stdin=$2; shift 2; fi
[ "$1" = "--" ] && shift

command=("$@")
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
timeout 10 "$@" <"$stdin" >"$out" 2>"$err"
actual=$?

fail() {
    echo "FAILED: $*"
    echo "--- command: ${command[*]}"
    echo "--- exit status: $actual (expected $status)"
    echo "--- stdout:"; head -c 3000 "$out"
    echo "--- stderr:"; head -c 3000 "$err"
    exit 1
}

fold() { tr -s ' \n\t' '   ' | sed 's/ $//'; }

check_stream() {  # name file pattern
    case "$3" in
        EMPTY) [ ! -s "$2" ] || fail "$1 should be empty" ;;
        ANY) ;;
        !*) ! fold <"$2" | grep -Eq -- "${3#!}" || fail "$1 should not match: ${3#!}" ;;
        *) fold <"$2" | grep -Eq -- "$3" || fail "$1 does not match: $3" ;;
    esac
}

[ "$actual" -eq "$status" ] || fail "exit status"
check_stream stdout "$out" "$out_pattern"
check_stream stderr "$err" "$err_pattern"
if [ "$status" -eq 2 ]; then
    [ "$(wc -l <"$err")" -eq 1 ] || fail "stderr should be one line"
    head -c 6 "$err" | grep -q '^error:' || fail "stderr should start with error:"
fi
exit 0
