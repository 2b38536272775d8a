#!/usr/bin/env bash
# A run that reads a checkpoint holds malloc's heap advised for transparent huge pages: a [heap]
# mapping of at least 256 MB whose VmFlags carry "hg" (MADV_HUGEPAGE), read from /proc while the
# run waits on its prompt from standard input (a FIFO held open here); the run then goes on as any.
#
#   huge_pages.sh FFN_TRACE MODEL_DIR
set -u
ffn=$1 model=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

mkfifo "$dir/prompt"
"$ffn" run --checkpoint "$model" --layer 0 --prompt-file - --detail summary --color never \
    <"$dir/prompt" >"$dir/out" 2>"$dir/err" &
pid=$!
exec 3>"$dir/prompt"   # the run starts and waits for its prompt
# The largest [heap] mapping whose flags carry "hg", in MB.
advised_mb() {
    local start end mb best=""
    while IFS=- read -r start end; do
        mb=$(( (16#$end - 16#$start) >> 20 ))
        [ -z "$best" ] || [ "$mb" -gt "$best" ] && best=$mb
    done < <(awk '/^[0-9a-f]+-[0-9a-f]+ / { range = $1; name = $6 } /^VmFlags:/ && name == "[heap]" && / hg/ { print range }'                  "/proc/$pid/smaps" 2>/dev/null)
    echo "$best"
}
advised=""
for ((i = 0; i < 100; ++i)); do
    advised=$(advised_mb)
    [ -n "$advised" ] && [ "$advised" -ge 256 ] && break
    sleep 0.1
done
printf 'The capital of France is' >&3
exec 3>&-
wait "$pid" || fail "the run exited with $? ($(head -c 300 "$dir/err"))"
[ -n "$advised" ] || fail "no part of the heap advised for huge pages"
[ "$advised" -ge 256 ] || fail "the heap advised for huge pages is $advised MB, expected at least 256"
grep -q "capital" "$dir/out" || fail "no trace of the prompt in the output"
echo "the heap advised for huge pages: $advised MB; the run went on"
