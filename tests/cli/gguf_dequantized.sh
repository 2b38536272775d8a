#!/usr/bin/env bash
# A quantized layer's units explained, in the JSON of `run --checkpoint FILE.gguf --unit`: each
# weight's block, numbers and value as tests/inputs/gguf/quantized_units.py computes them from the
# file's own bytes; and a Mixtral whose experts are quantized traces as the same layer written as
# F64 safetensors (its JSON's numbers equal to 1e-12, tests/cli/json_same.py).
#
#   gguf_dequantized.sh FFN_TRACE QUANTIZED_PY WHICH
# WHICH: "layer" (--embedding), "prompt" (--prompt), "moe" (the experts against F64, and --unit E:J).
set -euo pipefail
ft=$1 quantized=$2 which=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case $which in
layer | prompt)
    python3 "$quantized" write dense "$work/q.gguf"
    input=(--embedding 2,3)
    [ "$which" = prompt ] && input=(--prompt "a b")
    # unit 300: its W2 row is the second Q6_K block of down's rows; unit 5 the first
    "$ft" run --checkpoint "$work/q.gguf" --layer 0 "${input[@]}" --unit 300 --unit 5 --format json >"$work/out.json"
    ;;
moe)
    python3 "$quantized" write moe "$work/q.gguf" "$work/f64"
    for ck in q.gguf f64; do
        "$ft" run --checkpoint "$work/$ck" --layer 0 --embedding 2,3,4 --format json | sed "s|$work/$ck|CHECKPOINT|g" >"$work/$ck.json"
    done
    grep -q '"stored"' "$work/q.gguf.json" || { echo "the GGUF layer's JSON names no stored types"; exit 1; }
    # what the GGUF run adds, left out: the stored types, and the vocabulary views of the tokenizer it holds
    python3 -c 'import json, sys
def without(x):
    if isinstance(x, dict):
        return {k: without(v) for k, v in x.items() if k not in ("stored", "vocab")}
    return [without(v) for v in x] if isinstance(x, list) else x
json.dump(without(json.load(open(sys.argv[1]))), open(sys.argv[2], "w"))' "$work/q.gguf.json" "$work/q.json"
    python3 "$(dirname "$0")/json_same.py" "$work/f64.json" "$work/q.json" 1e-12 >/dev/null
    python3 -c 'import json, sys
routed = {e for r in json.load(open(sys.argv[1]))["routing"] for e in r["experts"]}
assert len(routed) > 1, f"every token went to the same experts: {routed}"' "$work/q.gguf.json"
    # expert 1 and expert 3: the block's index counts the slices of the experts before it
    "$ft" run --checkpoint "$work/q.gguf" --layer 0 --embedding 2,3,4 --unit 1:7 --unit 3:60 --format json >"$work/out.json"
    ;;
esac
python3 "$quantized" check "$work/q.gguf" "$work/out.json"
