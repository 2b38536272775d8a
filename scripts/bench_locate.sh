#!/usr/bin/env bash
# `ffn-trace locate` against the same causal tracing written plainly in PyTorch float64
# (scripts/bench_locate.py) on the same files, with random weights of GPT-2 small's shape (12 layers
# of 768, F32, a tied 50257 × 768 head; scripts/bench_make_checkpoints.py writes it) and a
# byte-level vocabulary without merges, so that a prompt of N letters is N tokens: the three grids
# (state, mlp, attn) with the default 10 samples and a window of 1. PyTorch reads the noise ffn-trace
# drew from ffn-trace's JSON, so both trace the very same runs, and says how far its probabilities
# are from ffn-trace's. PyTorch's import time is given apart. A benchmark for people, not a test.
#
#   scripts/bench_locate.sh
#   BENCH_SMALL=1 (every width shrunk to d_model 64)  BENCH_TOKENS=20  BENCH_SAMPLES=10
#   BENCH_DIR=build/bench  PYTHON=/usr/bin/python3  FFN_TRACE=build/ffn-trace
set -euo pipefail
cd "$(dirname "$0")/.."

samples=${BENCH_SAMPLES:-10}
source scripts/bench_prompt_setup.sh

# The load goes with the timings: on a shared machine the wall times stretch with it.
load_before=$(uptime)
echo "ffn-trace locate: $tokens tokens, $samples samples, window 1" >&2
/usr/bin/time -v -o "$out/locate.time" \
    "$ft" locate --checkpoint "$dir" --prompt "$prompt" --subject "efg" --samples "$samples" --format json -o "$out/locate.json"
echo "PyTorch float64, the same tracing" >&2
/usr/bin/time -v -o "$out/locate-torch.time" \
    "$python" scripts/bench_locate.py "$dir" "$out/locate.json" >"$out/locate-torch.out"

[ -n "$small" ] && echo "(BENCH_SMALL: every width shrunk to d_model 64; these are not the real shapes)"
"$python" scripts/bench_table.py locate "$out/locate.time" "$out/locate-torch.time" "$out/locate-torch.out" "$dir/config.json" \
    "$tokens tokens, $samples samples, window 1, the three grids" | tee "$out/locate-table.md"
printf '\nLoad before: %s\nLoad after:  %s\n' "$load_before" "$(uptime)" | tee -a "$out/locate-table.md"
