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

small=${BENCH_SMALL:-0}; [ "$small" = 0 ] && small=""
tokens=${BENCH_TOKENS:-20}
samples=${BENCH_SAMPLES:-10}
bench_dir=${BENCH_DIR:-build/bench}
python=${PYTHON:-/usr/bin/python3}
ft=${FFN_TRACE:-build/ffn-trace}
cache=$bench_dir/cache${small:+-small}
out=$bench_dir/out${small:+-small}

"$python" -c 'import torch, numpy' 2>/dev/null \
    || { echo "error: $python cannot import torch and numpy (apt-get install python3-torch python3-numpy)" >&2; exit 2; }
[ -x "$ft" ] || { echo "error: $ft not built: cmake --build --preset default --target ffn-trace" >&2; exit 2; }

mkdir -p "$cache" "$out"
BENCH_SMALL=${small:+1} "$python" scripts/bench_make_checkpoints.py "$cache" --only gpt2-forward ${small:+--small}
# The checkpoint with a tokenizer: GPT-2's byte-to-unicode table as the first 256 tokens, the rest
# unused, no merges.
dir=$cache/gpt2-locate
mkdir -p "$dir"
ln -sf "$(cd "$cache/gpt2-forward" && pwd)/model.safetensors" "$dir/model.safetensors"
cp "$cache/gpt2-forward/config.json" "$dir/config.json"
"$python" - "$dir" <<'EOF'
import json, os, sys
d = sys.argv[1]
vocab_size = json.load(open(os.path.join(d, "config.json")))["vocab_size"]
keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
table, n = {}, 0
for b in range(256):
    table[b] = chr(b) if b in keep else chr(256 + n)
    n += b not in keep
vocab = {table[b]: b for b in range(256)}
for i in range(256, vocab_size):
    vocab[f"<unused{i}>"] = i
json.dump(vocab, open(os.path.join(d, "vocab.json"), "w"), ensure_ascii=False)
open(os.path.join(d, "merges.txt"), "w").write("#version: 0.2\n")
EOF
prompt=$(head -c "$tokens" < <(yes abcdefghijklmnopqrstuvwxyz | tr -d '\n'))
cat "$dir/model.safetensors" >/dev/null  # a warm page cache

echo "ffn-trace locate: $tokens tokens, $samples samples, window 1" >&2
/usr/bin/time -f "%e %U %S %M" -o "$out/locate.time" \
    "$ft" locate --checkpoint "$dir" --prompt "$prompt" --subject "efg" --samples "$samples" --format json -o "$out/locate.json"
echo "PyTorch float64, the same tracing" >&2
/usr/bin/time -f "%e %U %S %M" -o "$out/locate-torch.time" \
    "$python" scripts/bench_locate.py "$dir" "$out/locate.json" >"$out/locate-torch.out"

read -r fw fu fs fm <"$out/locate.time"
read -r tw tu ts tm <"$out/locate-torch.time"
[ -n "$small" ] && echo "(BENCH_SMALL: every width shrunk to d_model 64; these are not the real shapes)"
"$python" - "$out/locate-torch.out" "$fw" "$fu" "$fs" "$fm" "$tw" "$tu" "$ts" "$tm" "$tokens" "$samples" "$dir/config.json" <<'EOF' | tee "$out/locate-table.md"
import json, sys
torch_out = json.load(open(sys.argv[1]))
fw, fu, fs, fm, tw, tu, ts, tm = (float(v) for v in sys.argv[2:10])
tokens, samples = sys.argv[10:12]
c = json.load(open(sys.argv[12]))
print(f"GPT-2 of {c['n_layer']} layers of {c['n_embd']} (F32, a tied {c['vocab_size']} × {c['n_embd']} head), {tokens} tokens,"
      f" {samples} samples, window 1: the three grids")
print("| route | wall (s) | CPU (s) | peak RSS (MB) |")
print("| --- | ---: | ---: | ---: |")
print(f"| ffn-trace locate | {fw:.2f} | {fu + fs:.2f} | {fm / 1024:.0f} |")
print(f"| PyTorch float64 (the process) | {tw:.2f} | {tu + ts:.2f} | {tm / 1024:.0f} |")
print(f"| PyTorch float64, the tracing alone | {torch_out['trace_seconds']:.2f} | | |")
print(f"PyTorch's import took {torch_out['import_seconds']} s, reading the weights {torch_out['setup_seconds']} s;"
      f" ffn-trace / PyTorch's tracing: {fw / torch_out['trace_seconds']:.2f}× (wall).")
print(f"Largest difference of a probability between the two: {torch_out['max_difference']:.2g}"
      f" ({'agree' if torch_out['max_difference'] < 1e-9 else 'DISAGREE'} to 1e-9)")
EOF
