#!/usr/bin/env bash
# `ffn-trace edit --facts` (MEMIT) against the same algorithm written plainly in PyTorch float64
# (scripts/bench_edit.py) on the same files: random weights of GPT-2 small's shape (12 layers of
# 768, F32; scripts/bench_make_checkpoints.py) with a byte-level vocabulary, 20 facts of random
# letters (a subject inside each prompt, a letter as the new target), written over layers 3-8 with
# 20 Adam passes each, C over a corpus of 100 lines of 20 letters. PyTorch says how far its p(target)
# after is from ffn-trace's. A benchmark for people, not a test.
#
#   scripts/bench_edit.sh
#   BENCH_SMALL=1 (every width shrunk to d_model 64)  BENCH_FACTS=20  BENCH_LAYERS=3-8
#   BENCH_DIR=build/bench  PYTHON=/usr/bin/python3  FFN_TRACE=build/ffn-trace
set -euo pipefail
cd "$(dirname "$0")/.."

facts=${BENCH_FACTS:-20}
layers=${BENCH_LAYERS:-3-8}
source scripts/bench_prompt_setup.sh

# The facts and the corpus: letters drawn by a fixed seed, one token each.
"$python" - "$out/edit-facts.tsv" "$out/edit-corpus.txt" "$facts" <<'PY'
import random, sys
r = random.Random(7)
letters = "abcdefghijklmnopqrstuvwxyz"
word = lambda n: "".join(r.choice(letters) for _ in range(n))
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[3])):
        subject = word(4)
        f.write(f"{word(6)}{subject}{word(5)}\t{subject}\t{r.choice(letters)}\n")
open(sys.argv[2], "w").write("".join(word(20) + "\n" for _ in range(100)))
PY

load_before=$(uptime)
echo "ffn-trace edit --facts: $facts facts, layers $layers" >&2
/usr/bin/time -v -o "$out/edit.time" \
    "$ft" edit --checkpoint "$dir" --facts "$out/edit-facts.tsv" --layers "$layers" --corpus "$out/edit-corpus.txt" \
    --force --format json -o "$out/edit.json"
echo "PyTorch float64, the same MEMIT" >&2
/usr/bin/time -v -o "$out/edit-torch.time" \
    "$python" scripts/bench_edit.py "$dir" "$out/edit-facts.tsv" "$out/edit-corpus.txt" "${layers%-*}" "${layers#*-}" \
    "$out/edit.json" >"$out/edit-torch.out"

[ -n "$small" ] && echo "(BENCH_SMALL: every width shrunk to d_model 64; these are not the real shapes)"
"$python" scripts/bench_table.py "edit --facts" "$out/edit.time" "$out/edit-torch.time" "$out/edit-torch.out" "$dir/config.json" \
    "$facts facts over layers $layers, 20 Adam passes each, C over 100 lines of 20 tokens" | tee "$out/edit-table.md"
printf '\nLoad before: %s\nLoad after:  %s\n' "$load_before" "$(uptime)" | tee -a "$out/edit-table.md"
