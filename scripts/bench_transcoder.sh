#!/usr/bin/env bash
# `ffn-trace transcoder train` against the same epochs written plainly in PyTorch float64
# (scripts/bench_transcoder_torch.py, batched, on the same x̂ and y): a GPT-2 checkpoint's layer
# BENCH_LAYER (1) of the shipped data/models/capitals (d_model 128), its corpus repeated until it
# has at least BENCH_TOKENS (10000) tokens, 1,024 features, TopK k 16, 20 epochs of 256-token
# batches. Wall and CPU seconds and peak RSS of each route from /usr/bin/time -v, PyTorch's import
# and its making of x̂ and y (NumPy float64) apart (scripts/bench_table.py). ffn-trace's memory is
# bounded by the corpus's activations: x̂ and y, 2 · T · d_model doubles, beside the model and the
# transcoder with its Adam moments. A benchmark for people, not a test.
#
#   scripts/bench_transcoder.sh   BENCH_MODEL=data/models/capitals BENCH_LAYER=1 BENCH_TOKENS=10000
#   BENCH_EPOCHS=20 BENCH_DIR=build/bench PYTHON=/usr/bin/python3 FFN_TRACE=build/ffn-trace
set -euo pipefail
cd "$(dirname "$0")/.."
model=${BENCH_MODEL:-data/models/capitals}
layer=${BENCH_LAYER:-1}
want=${BENCH_TOKENS:-10000}
epochs=${BENCH_EPOCHS:-20}
python=${PYTHON:-/usr/bin/python3}
ft=${FFN_TRACE:-build/ffn-trace}
out=${BENCH_DIR:-build/bench}/transcoder
"$python" -c 'import torch, numpy' 2>/dev/null \
    || { echo "error: $python cannot import torch and numpy (apt-get install python3-torch python3-numpy)" >&2; exit 2; }
mkdir -p "$out"
# The corpus's ids, each text tokenized once by ffn-trace, and the texts repeated until there are
# enough tokens: the same texts for both routes.
"$python" - "$ft" "$model" "$want" "$out" <<'PY'
import json, subprocess, sys
ft, model, want, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
texts = [t for t in open(f"{model}/corpus.txt", encoding="utf-8").read().split("\n") if t.strip(" \t")]
ids = [json.loads(subprocess.run([ft, "tokenize", "--checkpoint", model, "--format", "json", t], capture_output=True, text=True,
                                 check=True).stdout)["token_ids"] for t in texts]
corpus, all_ids, n = [], [], 0
while n < want:
    for t, i in zip(texts, ids):
        corpus.append(t); all_ids.append(i); n += len(i)
open(f"{out}/corpus.txt", "w", encoding="utf-8").write("\n".join(corpus) + "\n")
json.dump(all_ids, open(f"{out}/ids.json", "w"))
print(f"{len(corpus)} texts, {n} tokens", file=sys.stderr)
PY
rm -rf "$out/tc"
echo "ffn-trace transcoder train: layer $layer, 1024 features, k 16, $epochs epochs" >&2
/usr/bin/time -v -o "$out/ft.time" "$ft" transcoder train --checkpoint "$model" --layer "$layer" --corpus "$out/corpus.txt" \
    --features 1024 --k 16 --epochs "$epochs" -o "$out/tc" --format json >"$out/ft.json"
echo "PyTorch float64, the same epochs on the same x̂ and y" >&2
/usr/bin/time -v -o "$out/torch.time" "$python" scripts/bench_transcoder_torch.py "$model" "$out/ids.json" "$layer" 1024 16 \
    "$epochs" "$out/ft.json" >"$out/torch.out"
"$python" scripts/bench_table.py "transcoder train" "$out/ft.time" "$out/torch.time" "$out/torch.out" "$model/config.json" \
    "$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens"])' "$out/torch.out") tokens of layer $layer's x̂ and y, 1,024 features, TopK k 16, $epochs epochs of 256-token batches" \
    | tee "$out/transcoder-table.md"
