#!/usr/bin/env bash
# Under a cap on the address space (ulimit -v) the matrix library would wait forever for a work
# buffer it cannot have. Too small a cap is one error line that names the cap to raise it to, and
# that cap is enough: the walkthrough and a prompt run on the shipped model then run to the end.
#
#   address_space_cap.sh FFN_TRACE DATA_DIR
set -u
ft=$1 data=$2
fail() { echo "FAILED: $*"; exit 1; }
capped() {  # KB COMMAND...: the command under the cap, stopped after FFN_TRACE_TEST_TIMEOUT seconds
    local kb=$1
    shift
    timeout "${FFN_TRACE_TEST_TIMEOUT:-10}" bash -c "ulimit -v $kb && exec \"\$@\"" capped "$@"
}

err=$(capped 200000 "$ft" run "$data/walkthrough.json" 2>&1 >/dev/null)
status=$?
[ "$status" -eq 2 ] || fail "a 195 MB cap: exit status $status, expected 2 ($err)"
pattern='^error: the address space is capped at 195 MB \(ulimit -v\) and [0-9]+ MB of it is left, less than the [0-9]+ MB the matrix library needs for its work buffer; raise the cap to at least ([0-9]+) MB$'
[[ $err =~ $pattern ]] || fail "a 195 MB cap: unexpected error line: $err"
raise_to=${BASH_REMATCH[1]}
[ "$raise_to" -gt 195 ] || fail "the cap to raise to, $raise_to MB, is not above the cap"

out=$(capped $((raise_to * 1024)) "$ft" run "$data/walkthrough.json" 2>&1)
status=$?
[ "$status" -eq 0 ] || fail "under the advised cap of $raise_to MB the walkthrough exits $status: $out"
grep -q "4 → 8 → 4" <<<"$out" || fail "under the advised cap the walkthrough prints no trace"

# A cap with room for one thread's buffer: the run takes one thread, and ends.
for i in 1 2 3; do
    out=$(capped 420000 "$ft" run --checkpoint "$data/models/capitals" --layer 0 --prompt "The capital of France is" --detail summary 2>&1)
    status=$?
    [ "$status" -eq 0 ] || fail "a prompt run under a 410 MB cap exits $status: $out"
    grep -q '" Paris"' <<<"$out" || fail "a prompt run under a 410 MB cap does not predict Paris"
done
echo "ok: a cap too small is named with the cap to raise it to, which is enough"
