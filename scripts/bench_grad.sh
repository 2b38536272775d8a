#!/usr/bin/env bash
# `ffn-trace grad --checkpoint --prompt` against the same forward and backward written plainly in
# PyTorch float64 autograd (scripts/bench_grad.py) on the same files, with random weights of GPT-2
# small's shape (12 layers of 768, F32, a tied 50257 × 768 head; scripts/bench_make_checkpoints.py)
# and a byte-level vocabulary without merges (scripts/bench_byte_vocab.py), so that a prompt of N
# letters is N tokens: the loss −log p(target) at the last token, differentiated back through every
# block after layer BENCH_LAYER (0: all twelve) to its FFN's output and weights. ffn-trace also
# traces that FFN's backward step by step, checks it by finite differences and ranks the units;
# its text report (--detail summary) is written. PyTorch's import time is given apart, and how far
# its loss, upstream and weight gradients are from ffn-trace's JSON. A benchmark for people, not a
# test.
#
#   scripts/bench_grad.sh
#   BENCH_SMALL=1 (every width shrunk to d_model 64)  BENCH_TOKENS=20  BENCH_LAYER=0
#   BENCH_DIR=build/bench  PYTHON=/usr/bin/python3  FFN_TRACE=build/ffn-trace
set -euo pipefail
cd "$(dirname "$0")/.."

layer=${BENCH_LAYER:-0}
source scripts/bench_prompt_setup.sh

echo "ffn-trace grad: $tokens tokens, layer $layer, target \"z\"" >&2
/usr/bin/time -v -o "$out/grad.time" \
    "$ft" grad --checkpoint "$dir" --layer "$layer" --prompt "$prompt" --target z --detail summary -o "$out/grad.txt"
# The JSON, untimed (it holds every weight's gradient as text): what PyTorch's numbers are compared with.
"$ft" grad --checkpoint "$dir" --layer "$layer" --prompt "$prompt" --target z --format json -o "$out/grad.json"
echo "PyTorch float64 autograd, the same forward and backward" >&2
/usr/bin/time -v -o "$out/grad-torch.time" \
    "$python" scripts/bench_grad.py "$dir" "$out/grad.json" "$layer" "$prompt" >"$out/grad-torch.out"

[ -n "$small" ] && echo "(BENCH_SMALL: every width shrunk to d_model 64; these are not the real shapes)"
"$python" scripts/bench_table.py grad "$out/grad.time" "$out/grad-torch.time" "$out/grad-torch.out" "$dir/config.json" \
    "$tokens tokens, layer $layer's FFN, the loss at the last token" | tee "$out/grad-table.md"
