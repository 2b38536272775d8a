#!/usr/bin/env bash
# A quantized layer's units explained, in the JSON of `run --checkpoint FILE.gguf --unit`: each
# weight's block, numbers and value as tests/inputs/gguf/quantized.py computes them from the
# file's own bytes; and a Mixtral whose experts are quantized traces as the same layer written as
# F64 safetensors (its JSON's numbers equal to 1e-12, relative or absolute).
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
    python3 - "$work/f64.json" "$work/q.gguf.json" <<'PY'
import json, math, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert "stored" in b, "the GGUF layer's JSON names no stored types"
del b["stored"]
# the vocabulary views: the GGUF file holds a tokenizer, the directory none
def without_vocab(x):
    if isinstance(x, dict):
        return {k: without_vocab(v) for k, v in x.items() if k != "vocab"}
    return [without_vocab(v) for v in x] if isinstance(x, list) else x
b = without_vocab(b)
def same(x, y, at):
    if isinstance(x, dict):
        assert isinstance(y, dict) and list(x) == list(y), f"{at}: fields {list(x)} against {list(y)}"
        for k in x:
            same(x[k], y[k], f"{at}.{k}")
    elif isinstance(x, list):
        assert isinstance(y, list) and len(x) == len(y), f"{at}: lengths differ"
        for i, (u, v) in enumerate(zip(x, y)):
            same(u, v, f"{at}[{i}]")
    elif isinstance(x, float) or isinstance(y, float):
        assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12), f"{at}: {x} against {y}"
    else:
        assert x == y, f"{at}: {x!r} against {y!r}"
same(a, b, "")
routed = [r["experts"] for r in b["routing"]]
assert len({e for r in routed for e in r}) > 1, f"every token went to the same experts: {routed}"
PY
    # expert 1 and expert 3: the block's index counts the slices of the experts before it
    "$ft" run --checkpoint "$work/q.gguf" --layer 0 --embedding 2,3,4 --unit 1:7 --unit 3:60 --format json >"$work/out.json"
    ;;
esac
python3 "$quantized" check "$work/q.gguf" "$work/out.json"
