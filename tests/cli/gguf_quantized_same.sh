#!/usr/bin/env bash
# A quantized Llama written as a GGUF file and as a safetensors directory of its weights in F64
# (tests/inputs/gguf/quantized.py) gives the same JSON for `run --layer 1 --prompt TEXT`: the
# same fields, the same token ids (those worked by hand below) and predictions, and every number
# equal to 1e-12, relative (absolute below 1). Prints "same" when they agree.
#
#   gguf_quantized_same.sh FFN_TRACE QUANTIZED_PY
set -euo pipefail
ft=$1 make=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$make" "$work"
for ck in model.gguf st; do
    "$ft" run --checkpoint "$work/$ck" --layer 1 --prompt "ab cab nib" --format json | sed "s|$work/$ck|CHECKPOINT|g" >"$work/$ck.json"
done
/usr/bin/python3 - "$work/model.gguf.json" "$work/st.json" <<'PY'
import json, math, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
count = [0]
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
        assert math.isfinite(x) and abs(x - y) <= 1e-12 * max(1.0, abs(y)), f"{at}: {x!r} against {y!r}"
        count[0] += 1
    else:
        assert x == y, f"{at}: {x!r} against {y!r}"
try:
    # "ab" merged; " cab" as Ġ, c, ab; " nib" as Ġ, n, i, b
    assert a["prompt"]["token_ids"] == [15, 14, 2, 15, 14, 13, 8, 1], f"token ids {a['prompt']['token_ids']}"
    assert len(a["steps"]) > 0 and a["prediction"]["top"], "no steps or no prediction"
    same(a, b, "")
except (AssertionError, KeyError, TypeError) as e:
    sys.exit(f"differs: {e}")
assert count[0] > 10000, f"only {count[0]} numbers compared"
print("same")
PY
