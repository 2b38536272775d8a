#!/usr/bin/env bash
# Runs a command and checks its exit status, stdout and stderr.
#
#   expect.sh STATUS STDOUT STDERR [--stdin FILE] [--stdout FILE|closed] [--error-lines N] -- COMMAND [ARGS...]
#
# STDOUT and STDERR are each "EMPTY" (nothing may be printed), "ANY", or an extended regular
# expression that must match the stream with its runs of blanks and newlines folded into one
# space ("!REGEX": must not match). In CMake, escape a ";" in a pattern as "\;".
# --stdout sends the command's stdout to FILE (e.g. /dev/full) or closes it, to test failed
# writes; STDOUT is then not checked.
# When STATUS is 2, stderr must be exactly one line that starts with "error:": one newline, at the
# end, no other control character (a raw CR or NUL would forge or hide a line) and valid UTF-8.
# --error-lines N: N such lines instead (check reports each file it could not read).
# A command that runs past FFN_TRACE_TEST_TIMEOUT seconds (10 unless set) is stopped and fails with
# status 124: a hang is a failure, not a stuck run. The sanitizer tree sets it higher.
set -u
status=$1 out_pattern=$2 err_pattern=$3
shift 3
stdin=/dev/null stdout= lines=1
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
        --stdin) stdin=$2; shift 2 ;;
        --error-lines) lines=$2; shift 2 ;;
        --stdout) stdout=$2; shift 2 ;;
        *) echo "expect.sh: unknown option $1"; exit 1 ;;
    esac
done
[ "${1:-}" = "--" ] && shift

command=("$@")
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
case "$stdout" in
    "") timeout "${FFN_TRACE_TEST_TIMEOUT:-10}" "$@" <"$stdin" >"$out" 2>"$err" ;;
    closed) timeout "${FFN_TRACE_TEST_TIMEOUT:-10}" "$@" <"$stdin" >&- 2>"$err" ;;
    *) timeout "${FFN_TRACE_TEST_TIMEOUT:-10}" "$@" <"$stdin" >"$stdout" 2>"$err" ;;
esac
actual=$?
# 77: the command found nothing it could test here (ctest's skip), said why on stdout
if [ "$actual" -eq 77 ] && [ "$status" -ne 77 ]; then cat "$out"; exit 77; fi

fail() {
    echo "FAILED: $*"
    echo "--- command: ${command[*]}"
    echo "--- exit status: $actual (expected $status)"
    echo "--- stdout:"; head -c 3000 "$out"
    echo "--- stderr:"; head -c 3000 "$err" | od -c | head -40
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
[ -n "$stdout" ] || check_stream stdout "$out" "$out_pattern"
check_stream stderr "$err" "$err_pattern"
if [ "$status" -eq 2 ]; then
    # Every byte but the printable ones and those of multi-byte characters: exactly one newline.
    controls=$(LC_ALL=C tr -d '\040-\176\200-\377' <"$err" | od -An -tx1 | tr -d ' \n')
    newlines=$(printf '0a%.0s' $(seq "$lines"))
    [ "$controls" = "$newlines" ] || fail "stderr should be $lines line(s) each ending in a newline, with no other control bytes (found: $controls)"
    [ "$(tail -c 1 "$err" | od -An -tx1 | tr -d ' \n')" = "0a" ] || fail "stderr should end in its newline"
    iconv -f UTF-8 -t UTF-8 "$err" >/dev/null 2>&1 || fail "stderr should be valid UTF-8"
    ! grep -qv '^error:' "$err" || fail "every line of stderr should start with error:"
fi
exit 0
