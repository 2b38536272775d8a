#!/usr/bin/env bash
# A run that reads a checkpoint starts itself once more with glibc's malloc asked for transparent
# huge pages (GLIBC_TUNABLES gains glibc.malloc.hugetlb=1), keeps the caller's own tunables, leaves
# a tunable the caller set as it is, and gives the same output as a run left to start once. The
# run waits on a prompt from standard input (a FIFO held open here) while its environment, as the
# second start received it, is read from /proc.
#
#   huge_pages.sh FFN_TRACE MODEL_DIR
set -u
ffn=$1 model=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

# environment_of TUNABLES: the GLIBC_TUNABLES (or "unset") that a run started with TUNABLES ("" for
# none) holds while it reads its prompt; the run's stdout goes to $dir/out.
environment_of() {
    local fifo=$dir/prompt pid env
    rm -f "$fifo"; mkfifo "$fifo"
    if [ -n "$1" ]; then
        GLIBC_TUNABLES=$1 "$ffn" run --checkpoint "$model" --layer 0 --prompt-file - --detail summary --color never \
            <"$fifo" >"$dir/out" 2>"$dir/err" &
    else
        env -u GLIBC_TUNABLES "$ffn" run --checkpoint "$model" --layer 0 --prompt-file - --detail summary --color never \
            <"$fifo" >"$dir/out" 2>"$dir/err" &
    fi
    pid=$!
    exec 3>"$fifo"   # the run starts, starts again if it does, and waits for its prompt
    # Started again, its environment holds the mark of the second start; a run that does not
    # start again is read after a moment.
    for ((i = 0; i < 100; ++i)); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -q '^FFN_TRACE_STARTED_AGAIN=' && break
        [ "$1" = glibc.malloc.hugetlb=0 ] && [ "$i" -ge 3 ] && break
        sleep 0.1
    done
    # glibc ends each tunable's value with a NUL where it lies as it reads them, so the ones after
    # the first follow as strings of their own: joined again with ':'.
    env=$(tr '\0' '\n' <"/proc/$pid/environ" |
          awk '/^GLIBC_TUNABLES=/ { v = substr($0, 16); on = 1; next } on && /^glibc\./ { v = v ":" $0; next } { on = 0 } END { print v }')
    printf 'The capital of France is' >&3
    exec 3>&-
    wait "$pid" || fail "the run exited with $? ($(head -c 300 "$dir/err"))"
    echo "${env:-unset}"
}

[ "$(environment_of "")" = "glibc.malloc.hugetlb=1" ] || fail "a run of its own: GLIBC_TUNABLES is $(environment_of "")"
cp "$dir/out" "$dir/out.huge"
got=$(environment_of "glibc.malloc.check=0")
[ "$got" = "glibc.malloc.check=0:glibc.malloc.hugetlb=1" ] || fail "the caller's tunables kept: got $got"
got=$(environment_of "glibc.malloc.hugetlb=0")
[ "$got" = "glibc.malloc.hugetlb=0" ] || fail "the caller's own hugetlb left as it is: got $got"
cmp -s "$dir/out" "$dir/out.huge" || fail "the output differs from the run that started again"
grep -q "capital" "$dir/out" || fail "no trace of the prompt in the output"
echo "started again with glibc.malloc.hugetlb=1, the caller's tunables kept, the output the same"
