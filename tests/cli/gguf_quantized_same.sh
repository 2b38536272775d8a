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
/usr/bin/python3 - "$work/model.gguf.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
# "ab" merged; " cab" as Ġ, c, ab; " nib" as Ġ, n, i, b
if a["prompt"]["token_ids"] != [15, 14, 2, 15, 14, 13, 8, 1] or not a["steps"] or not a["prediction"]["top"]:
    sys.exit(f"token ids {a['prompt']['token_ids']}, or no steps or prediction")
PY
# the GGUF run names its layer's stored types ("stored"), which a directory of floats has not
/usr/bin/python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))
assert [s["type"] for s in a.pop("stored")] == ["Q5_K", "Q8_0", "Q6_K"], "layer 1 stored otherwise"
json.dump(a, open(sys.argv[1], "w"))' "$work/model.gguf.json"
numbers=$(/usr/bin/python3 "$(dirname "$0")/json_same.py" "$work/model.gguf.json" "$work/st.json" 1e-12)
[ "${numbers%% *}" -gt 10000 ] || { echo "only $numbers"; exit 1; }
echo same
