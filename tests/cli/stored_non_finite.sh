#!/usr/bin/env bash
# A checkpoint with one weight stored as NaN or ±inf: every route that reads it names the file, the
# tensor and the row and column, and says that the file holds the value (not that a step overflowed).
# Each case copies the shipped model (data/models/capitals, F32), writes one value into one tensor
# with Python, and runs ffn-trace on it. Usage: stored_non_finite.sh FFN_TRACE MODEL_DIR PYTHON
set -euo pipefail
ft=$1 model=$2 python=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# damaged NAME TENSOR ROW COLUMN VALUE: a copy of the model with TENSOR[ROW, COLUMN] (a 1-D
# tensor: element COLUMN) set to VALUE ("nan", "inf", "-inf"), in $work/NAME.
damaged() {
    mkdir -p "$work/$1"
    cp "$model"/* "$work/$1/"
    "$python" - "$work/$1/model.safetensors" "$2" "$3" "$4" "$5" <<'PY'
import json, struct, sys
path, name, row, col, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    t = json.loads(f.read(n))[name]
    assert t["dtype"] == "F32"
    cols = t["shape"][-1] if len(t["shape"]) == 2 else 1
    f.seek(8 + n + t["data_offsets"][0] + 4 * (row * cols + col))
    f.write(struct.pack("<f", value))
PY
}

# expect NAME PATTERN ARGS...: ffn-trace ARGS exits 2, prints nothing on stdout and one line on
# stderr matching PATTERN (an extended regex).
expect() {
    local name=$1 pattern=$2
    shift 2
    local status=0
    "$ft" "$@" >"$work/out" 2>"$work/err" || status=$?
    if [ "$status" -ne 2 ] || [ -s "$work/out" ] || [ "$(wc -l <"$work/err")" -ne 1 ] || ! grep -Eq -- "$pattern" "$work/err"; then
        echo "FAIL: $name: exit $status, stderr:"; cat "$work/err"; echo "expected: $pattern"
        failures=$((failures + 1))
    else
        echo "ok: $name: $(cat "$work/err")"
    fi
}

prompt="The capital of France is"  # ids 267 270 263 529 259
stored="is (NaN|inf|-inf): the file holds it so \(no step overflowed\); the checkpoint is damaged$"

damaged c_fc h.0.mlp.c_fc.weight 3 5 nan
expect "c_fc, in a prompt run" "^error: .*c_fc/model\.safetensors: h\.0\.mlp\.c_fc\.weight: the value stored at row 3, column 5 of this F32 tensor \(128, 256\) is NaN: .*damaged$" \
    run --checkpoint "$work/c_fc" --layer 0 --prompt "$prompt"
expect "c_fc, in a layer traced on its own" "^error: .*c_fc/model\.safetensors: h\.0\.mlp\.c_fc\.weight: the value stored at row 3, column 5 .*$stored" \
    run --checkpoint "$work/c_fc" --layer 0 --embedding 529,716 --format json

damaged wte wte.weight 529 7 inf
expect "the embedding row of a prompt token" "^error: .*wte/model\.safetensors: wte\.weight: the value stored at row 529, column 7 of this F32 tensor \(729, 128\) is inf: " \
    run --checkpoint "$work/wte" --layer 0 --prompt "$prompt"

damaged wpe wpe.weight 2 0 -inf
expect "a position's row (wpe)" "^error: .*wpe/model\.safetensors: wpe\.weight: the value stored at row 2, column 0 .*is -inf: " \
    run --checkpoint "$work/wpe" --layer 1 --prompt "$prompt"

damaged attention h.1.attn.c_attn.weight 100 300 nan
expect "a later layer's attention" "^error: .*attention/model\.safetensors: h\.1\.attn\.c_attn\.weight: the value stored at row 100, column 300 .*$stored" \
    run --checkpoint "$work/attention" --layer 1 --prompt "$prompt"
# Layer 0's run never reaches layer 1's attention, but the lens and the prediction run the rest.
expect "a later layer's attention, run for the prediction" "^error: .*h\.1\.attn\.c_attn\.weight: the value stored at row 100, column 300 " \
    run --checkpoint "$work/attention" --layer 0 --prompt "$prompt"

damaged final_norm ln_f.weight 0 17 nan
expect "the final norm" "^error: .*final_norm/model\.safetensors: ln_f\.weight: the value stored at element 17 of this F32 tensor \(128,\) is NaN: " \
    run --checkpoint "$work/final_norm" --layer 0 --prompt "$prompt"

# The head is tied to wte: a row no prompt token reads is met by the unembedding.
damaged head wte.weight 700 64 -inf
expect "the head (tied to wte), at a row no prompt token reads" "^error: .*head/model\.safetensors: wte\.weight: the value stored at row 700, column 64 .*is -inf: " \
    run --checkpoint "$work/head" --layer 0 --prompt "$prompt"

[ "$failures" -eq 0 ] || { echo "$failures failed"; exit 1; }
echo "every route names the tensor, its row and column"
