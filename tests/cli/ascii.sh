#!/usr/bin/env bash
# Runs every subcommand with --ascii over every example of data/ and checks that no byte of stdout
# is above 127.
#
#   ascii.sh FFN_TRACE DATA_DIR
set -u
ft=$1 data=$2
runs=()
for f in "$data"/*.json; do
    for args in "run $f" "run $f --detail values" "run $f --detail summary" "run $f --format markdown" \
                "run $f --format json" "run $f --bars" "grad $f --lr 0.1" "grad $f --format markdown" "grad $f --format json" "check $f" \
                "worksheet $f" "quiz $f --format json" "quiz $f --count 8"; do
        runs+=("$args")
    done
done
for m in gpt2 bert-base llama2-7b mixtral-8x7b; do
    runs+=("params --model $m" "params --model $m --format markdown" "params --model $m --format json")
done
# A byte-level BPE's spellings (Ġ) and a word beyond ASCII, through the shipped model's tokenizer.
runs+=("tokenize --checkpoint $data/models/capitals Zürich" "tokenize --checkpoint $data/models/capitals Zürich --format json")
runs+=("sweep $data/abs_relu.json --from -3 --to 3" "sweep $data/abs_identity.json --from -2 --to 2")
runs+=("gelu-table --exact --derivative --silu --phi" "gelu-table --format markdown --exact"
       "gelu-table --plot --exact --derivative --silu --phi" "gelu-table --format json --exact")
checked=0
for args in "${runs[@]}"; do
    # grad needs a loss and check fails on slipped claims: only the bytes written matter here.
    # shellcheck disable=SC2086
    out=$("$ft" $args --ascii 2>/dev/null </dev/null)
    [ -z "$out" ] && continue
    checked=$((checked + 1))
    if printf '%s' "$out" | LC_ALL=C grep -q $'[\x80-\xff]'; then
        echo "FAILED: a byte above 127 from: ffn-trace $args --ascii"
        printf '%s\n' "$out" | LC_ALL=C grep -n $'[\x80-\xff]' | head -5
        exit 1
    fi
done
echo "$checked outputs, all pure ASCII"
[ "$checked" -ge 80 ] || { echo "FAILED: only $checked outputs checked"; exit 1; }
