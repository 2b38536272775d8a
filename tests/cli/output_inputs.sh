#!/usr/bin/env bash
# -o never changes an input: every subcommand that writes a file, with -o pointed at each file it
# reads (directly, through a symlink and through a hard link), must refuse with one error line and
# exit 2, and leave every input byte for byte as it was.
#
#   output_inputs.sh FFN_TRACE DATA_DIR INPUTS_DIR
set -u
ft=$1 data=$2 inputs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

cp "$data/lesson_hand.json" "$data/abs_relu.json" "$work/"
cp -r "$inputs/checkpoints" "$work/checkpoints"
cp "$inputs/checkpoint_claims.json" "$work/"
cp -r "$work" "$work.pristine" && trap 'rm -rf "$work" "$work.pristine"' EXIT

# One attempt: the command with -o TARGET; INPUT is the file TARGET names.
attempt() {
    local how=$1 input=$2 target=$3
    shift 3
    local err
    err=$(cd "$work" && timeout "${FFN_TRACE_TEST_TIMEOUT:-10}" "$ft" "$@" -o "$target" 2>&1 >/dev/null)
    local status=$?
    if [ $status -ne 2 ] || ! grep -Eq "^error: -o .* is also an input of this command; choose another file$" <<<"$err"; then
        echo "FAIL ($how): $* -o $target: exit $status, stderr: $err"
        failures=$((failures + 1))
    fi
    # Every input unchanged (the links this attempt made aside).
    rm -f "$work/link" "$work/hard"
    if ! diff -r "$work.pristine" "$work" >/dev/null; then
        echo "FAIL ($how): $* -o $target changed an input:"
        diff -rq "$work.pristine" "$work"
        failures=$((failures + 1))
        rm -rf "$work" && cp -r "$work.pristine" "$work"
    fi
}

# Each input three ways: its own name, a symlink to it, a hard link to it.
each_way() {
    local input=$1
    shift
    attempt direct "$input" "$input" "$@"
    (cd "$work" && ln -s "$input" link)
    attempt symlink "$input" link "$@"
    (cd "$work" && ln "$input" hard)
    attempt "hard link" "$input" hard "$@"
}

for sub in "run" "run --format html" "grad" "worksheet" "worksheet --format html"; do
    # shellcheck disable=SC2086
    each_way lesson_hand.json $sub lesson_hand.json
done
each_way abs_relu.json sweep abs_relu.json --from -1 --to 1
for input in checkpoint_claims.json checkpoints/llama/config.json checkpoints/llama/model.safetensors; do
    each_way "$input" run checkpoint_claims.json
done
for input in checkpoints/gpt2/config.json checkpoints/gpt2/model.safetensors checkpoints/gpt2/vocab.json; do
    each_way "$input" run --checkpoint checkpoints/gpt2 --layer 1 --word " Paris" --detail summary
done
for input in checkpoints/llama/model.safetensors checkpoints/x.npy; do
    each_way "$input" run --checkpoint checkpoints/llama --layer 0 --input checkpoints/x.npy --format json
done
# Standard input read from a file is an input too.
attempt "standard input" lesson_hand.json lesson_hand.json run - < "$work/lesson_hand.json"

# And a file that is no input is written whole, through its symlink, and keeps its mode.
(cd "$work" && echo old > out.html && chmod 640 out.html && ln -s out.html out-link \
    && "$ft" run lesson_hand.json --format html -o out-link) || { echo "FAIL: -o through a symlink"; failures=$((failures + 1)); }
if [ ! -L "$work/out-link" ] || ! grep -q "^</html>$" "$work/out.html" || [ "$(stat -c %a "$work/out.html")" != 640 ]; then
    echo "FAIL: -o through a symlink should replace the file it names, keeping its mode"
    failures=$((failures + 1))
fi
if ls -a "$work" | grep -q '^\.out'; then
    echo "FAIL: -o left a temporary file behind"
    failures=$((failures + 1))
fi

[ $failures -eq 0 ] && echo "-o refused every input, and every input is unchanged"
exit $((failures > 0))
