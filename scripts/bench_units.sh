#!/usr/bin/env bash
# `ffn-trace units` against the same work written plainly in PyTorch float64
# (scripts/bench_units_torch.py): GPT-2 small's shape (12 layers of 768, 3072 units, a tied 50257 ×
# 768 head, random weights from scripts/bench_make_checkpoints.py), a corpus of BENCH_TEXTS (1000)
# texts of 32 tokens, every unit of layer BENCH_LAYER (0): the forward passes, a top-10 per unit,
# the mean and density, and every unit's value and key scores over the vocabulary. Each route once:
# wall and CPU seconds and peak RSS from /usr/bin/time -v, PyTorch's import apart
# (scripts/bench_table.py); then how far PyTorch's top-k activations, means and promoted scores are
# from ffn-trace's. A benchmark for people, not a test.
#
#   scripts/bench_units.sh     BENCH_SMALL=1 BENCH_TEXTS=50 BENCH_DIR=build/bench PYTHON=/usr/bin/python3
set -euo pipefail
cd "$(dirname "$0")/.."
small=${BENCH_SMALL:-0}; [ "$small" = 0 ] && small=""
texts=${BENCH_TEXTS:-1000}
layer=${BENCH_LAYER:-0}
python=${PYTHON:-/usr/bin/python3}
bench_dir=${BENCH_DIR:-build/bench}
cache=$bench_dir/cache${small:+-small}
"$python" -c 'import torch, numpy' 2>/dev/null \
    || { echo "error: $python cannot import torch and numpy (apt-get install python3-torch python3-numpy)" >&2; exit 2; }
"$python" scripts/bench_make_checkpoints.py "$cache" --only gpt2-forward ${small:+--small} >&2
model=$cache/gpt2-forward
# A byte-level tokenizer without merges: each byte of a text is one token, its id its place in
# GPT-2's byte table, so a text of 32 letters is 32 tokens.
"$python" - "$model" "$texts" <<'PY'
import json, random, sys
d, n = sys.argv[1], int(sys.argv[2])
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, k = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + k); k += 1
json.dump({chr(c): i for i, c in enumerate(cs)}, open(f"{d}/vocab.json", "w"), ensure_ascii=False)
open(f"{d}/merges.txt", "w").write("#version: 0.2\n")
rng = random.Random(7)
with open(f"{d}/../units_corpus.txt", "w") as f:
    for _ in range(n):
        f.write("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(32)) + "\n")
PY
corpus=$cache/units_corpus.txt
out=$bench_dir/units_out${small:+-small}
mkdir -p "$out"
cat "$model/model.safetensors" >/dev/null  # a warm page cache
echo "ffn-trace units: $texts texts of 32 tokens, layer $layer, every unit" >&2
/usr/bin/time -v -o "$out/ft.time" ./build/ffn-trace units --checkpoint "$model" --layer "$layer" --corpus "$corpus" \
    --format json -o "$out/ft.json"
echo "PyTorch float64, the same forward passes and top-k" >&2
/usr/bin/time -v -o "$out/torch.time" "$python" scripts/bench_units_torch.py "$model" "$corpus" "$layer" 10 "$out/ft.json" >"$out/torch.out"
[ -n "$small" ] && echo "(BENCH_SMALL: every width shrunk to d_model 64; these are not the real shapes)"
"$python" scripts/bench_table.py units "$out/ft.time" "$out/torch.time" "$out/torch.out" "$model/config.json" \
    "$texts texts of 32 tokens, every unit of layer $layer, a top 10 each" | tee "$out/units-table.md"
