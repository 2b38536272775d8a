#!/usr/bin/env bash
# A Llama-2-7B-shaped FFN layer (4096 → 11008 SwiGLU, random weights) read from a Q4_K_M GGUF
# file (ffn_gate and ffn_up Q4_K, ffn_down Q6_K, the norm F32) against the same layer read from
# BF16 safetensors (the dequantized weights rounded to BF16; scripts/bench_gguf_make.py writes
# both once into $BENCH_DIR/cache/gguf-llama): `run --checkpoint … --layer 0 --input input.npy
# --format json` on 16 tokens, the two routes interleaved, BENCH_RUNS times each (3). The table
# gives the median wall and CPU (user + sys) seconds and peak RSS (/usr/bin/time -v), GGUF ÷ BF16,
# and the load average the runs were made under; then how far the two outputs are apart (BF16's
# rounding of the weights, not 0). A benchmark for people, not a test.
#
#   scripts/bench_gguf.sh     (`make bench` runs it)
#   BENCH_SMALL=1 (d_model 256, d_ff 512: tests the script)  BENCH_RUNS=5  BENCH_DIR=build/bench
#   PYTHON=/usr/bin/python3  FFN_TRACE=build/ffn-trace
set -euo pipefail
cd "$(dirname "$0")/.."

small=${BENCH_SMALL:-0}; [ "$small" = 0 ] && small=""
runs=${BENCH_RUNS:-3}
bench_dir=${BENCH_DIR:-build/bench}
python=${PYTHON:-/usr/bin/python3}
ffn=${FFN_TRACE:-./build/ffn-trace}
cache=$bench_dir/cache${small:+-small}/gguf-llama
out=$bench_dir/out${small:+-small}/gguf
[ -x "$ffn" ] || { echo "error: $ffn not built: run make build first" >&2; exit 2; }
"$python" -c 'import numpy' 2>/dev/null || { echo "error: $python cannot import numpy" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }

mkdir -p "$cache" "$out"
if [ ! -f "$cache/model.gguf" ]; then
    free_mb=$(df -Pm "$cache" | awk 'NR == 2 { print $4 }')
    [ "$free_mb" -lt 1000 ] && { echo "error: about 500 MB needed in $cache, $free_mb MB free" >&2; exit 2; }
fi
"$python" scripts/bench_gguf_make.py "$cache" ${small:+--small}

# run_timed NAME CHECKPOINT: appends "wall cpu peak_kb status" to $out/NAME.times
run_timed() {
    local name=$1 checkpoint=$2 status=0
    /usr/bin/time -v -o "$out/$name.time" "$ffn" run --checkpoint "$checkpoint" --layer 0 --input "$cache/input.npy" \
        --format json >"$out/$name.json" 2>"$out/$name.stderr" || status=$?
    [ "$status" -ne 0 ] && echo "  $name failed (exit $status): $(head -c 400 "$out/$name.stderr")" >&2
    "$python" - "$out/$name.time" "$status" >>"$out/$name.times" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
field = lambda name: re.search(re.escape(name) + r":\s*(\S+)", text).group(1)
clock = [float(p) for p in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
wall = sum(v * 60 ** i for i, v in enumerate(reversed(clock)))
cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
print(f"{wall:.3f} {cpu:.3f} {field('Maximum resident set size (kbytes)')} {sys.argv[2]}")
EOF
}

rm -f "$out"/*.times
cat "$cache/model.gguf" "$cache/bf16/model.safetensors" >/dev/null  # a warm page cache for every run
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "gguf-llama: $runs runs each, interleaved (load average $load_before)" >&2
for ((r = 1; r <= runs; ++r)); do
    run_timed bf16 "$cache/bf16"
    run_timed gguf "$cache/model.gguf"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

[ -n "$small" ] && echo "(BENCH_SMALL: d_model 256, d_ff 512; these are not the real shapes)"
"$python" - "$out" "$cache" "$load_before" "$load_after" "$(nproc)" <<'EOF' | tee "$out/table.md"
import json, os, sys
import numpy as np
out, cache, before, after, cores = sys.argv[1:6]

def medians(name):
    rows = [line.split() for line in open(os.path.join(out, f"{name}.times"))]
    ok = [r for r in rows if r[3] == "0"]
    if not ok:
        return None
    med = lambda i: sorted(float(r[i]) for r in ok)[(len(ok) - 1) // 2]
    return med(0), med(1), med(2) / 1024, len(rows) - len(ok)

c = json.load(open(os.path.join(cache, "bf16", "config.json")))
tokens = np.load(os.path.join(cache, "input.npy"), mmap_mode="r").shape[0]
b, g = medians("bf16"), medians("gguf")
print(f"Llama-2-7B-shaped layer 0 ({c['hidden_size']} → {c['intermediate_size']} SwiGLU), {tokens} tokens, "
      f"`run --format json`, median of {len(open(os.path.join(out, 'gguf.times')).readlines())} runs "
      f"(load average {before} before, {after} after, {cores} cores):")
print()
print("| weights | wall (s) | CPU (s) | peak RSS (MB) | GGUF ÷ BF16 (wall, CPU, RSS) |")
print("| --- | ---: | ---: | ---: | --- |")
for label, m, ratio in [("BF16 safetensors", b, ""), ("Q4_K_M GGUF (Q4_K, Q6_K down)", g, "")]:
    if m is None:
        print(f"| {label} | — | — | — | every run failed |")
        continue
    if label.startswith("Q4") and b:
        ratio = f"{m[0] / b[0]:.2f}×, {m[1] / b[1]:.2f}×, {m[2] / b[2]:.2f}×"
    failed = f" ({m[3]} runs failed)" if m[3] else ""
    print(f"| {label}{failed} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:,.0f} | {ratio} |")

def residual(name):
    doc = json.load(open(os.path.join(out, f"{name}.json")))
    return np.asarray(next(s["value"] for s in doc["steps"] if s["name"] == "residual"), dtype=np.float64)

try:
    a, q = residual("bf16"), residual("gguf")
    print()
    print(f"The two residuals differ by at most {np.abs(a - q).max():.3g} (largest value {np.abs(q).max():.3g}): "
          f"the BF16 file holds the dequantized weights rounded to 8 significant bits.")
except (OSError, ValueError, StopIteration, KeyError) as e:
    print(f"outputs not compared ({type(e).__name__}: {e})")
EOF
echo "(outputs, stderr and every run's times in $out)"
