#!/usr/bin/env bash
# A whole Llama-2-7B of real shape through `run --prompt`: 32 layers of 4096 (32 heads, 11008
# SwiGLU, BF16, a 32,000 × 4096 lm_head), random weights in two shards with their index (13.5 GB,
# written once into build/bench/cache/llama-7b by scripts/bench_make_7b.py), a 32-token prompt,
# layer 16 traced, the lens and the prediction. `make bench-7b` runs it; it is not part of
# `make bench` (its 13.5 GB, and about a minute a run).
#
# ffn-trace runs `run --checkpoint … --layer 16 --prompt … --format json` and `--detail summary`
# BENCH_RUNS times each (3), interleaved, on a warm page cache; each run's wall seconds, CPU
# seconds (user + system) and peak RSS come from /usr/bin/time -v. Then the same forward pass in
# NumPy float64 streaming the same shards (scripts/bench_7b_reference.py) checks the prediction and
# the lens at the last token, and scripts/bench_limit.py prints the multiply-adds, this machine's
# dgemm rate measured now and the limit, with ffn-trace's median as a multiple of it.
# A benchmark for people, not a test.
#
#   scripts/bench_7b.sh
#   BENCH_SMALL=1 BENCH_RUNS=1 BENCH_DIR=build/bench PYTHON=/usr/bin/python3 FFN_TRACE=./build/ffn-trace
set -euo pipefail
cd "$(dirname "$0")/.."

small=${BENCH_SMALL:-0}; [ "$small" = 0 ] && small=""
runs=${BENCH_RUNS:-3}
bench_dir=${BENCH_DIR:-build/bench}
python=${PYTHON:-/usr/bin/python3}
ffn_trace=${FFN_TRACE:-./build/ffn-trace}
cache=$bench_dir/cache${small:+-small}
out=$bench_dir/out${small:+-small}
dir=$cache/llama-7b
layer=16
prompt="The capital of France is Paris, and Rome is in the"  # 32 tokens with <s>, by its tokenizer

"$python" -c 'import numpy' 2>/dev/null || { echo "error: $python cannot import numpy (apt-get install python3-numpy)" >&2; exit 2; }
[ -x "$ffn_trace" ] || { echo "error: $ffn_trace not built: cmake --build --preset default --target ffn-trace" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time not found (apt-get install time)" >&2; exit 2; }

mkdir -p "$cache" "$out"
"$python" scripts/bench_make_7b.py "$cache" ${small:+--small}

ids=$("$ffn_trace" tokenize --checkpoint "$dir" --format json "$prompt" \
      | "$python" -c 'import json, sys; print(",".join(map(str, json.load(sys.stdin)["token_ids"])))')
tokens=$(tr ',' '\n' <<<"$ids" | wc -l)
[ -n "$small" ] || [ "$tokens" = 32 ] || { echo "error: the prompt is $tokens tokens, not 32" >&2; exit 2; }

# "wall cpu peak_kb status" appended to $out/NAME.times for each run
run_timed() {  # NAME STDOUT CMD...
    local name=$1 stdout=$2; shift 2
    local start end status=0
    start=$(date +%s%N)
    /usr/bin/time -v -o "$out/$name.time" "$@" >"$stdout" 2>"$out/$name.stderr" || status=$?
    end=$(date +%s%N)
    awk -v a="$start" -v b="$end" -v s="$status" -F': ' '
        /User time/ { u = $2 } /System time/ { y = $2 } /Maximum resident/ { kb = $2 }
        END { printf "%.3f %.2f %d %d\n", (b - a) / 1e9, u + y, kb, s }' "$out/$name.time" >>"$out/$name.times"
    [ "$status" -eq 0 ] || echo "  $name failed (exit $status): $(head -c 400 "$out/$name.stderr")" >&2
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR + 1) / 2)] }'; }
column_of() { awk -v c="$2" '$4 == 0 { print $c }' "$out/$1.times" | median; }  # NAME COLUMN

rm -f "$out"/llama-7b.*.times
echo "llama-7b: warming the page cache with its $(du -sh "$dir" | cut -f1) of shards; load: $(uptime | sed 's/.*load/load/')" >&2
cat "$dir"/*.safetensors >/dev/null
for ((r = 1; r <= runs; ++r)); do
    echo "llama-7b: run $r of $runs" >&2
    run_timed llama-7b.json "$out/llama-7b.json.out" \
        "$ffn_trace" run --checkpoint "$dir" --layer "$layer" --prompt "$prompt" --format json
    run_timed llama-7b.summary "$out/llama-7b.summary.out" \
        "$ffn_trace" run --checkpoint "$dir" --layer "$layer" --prompt "$prompt" --detail summary --width 80
done
run_timed llama-7b.numpy "$out/llama-7b.numpy.out" "$python" scripts/bench_7b_reference.py "$dir" "$layer" "$ids"
load=$(uptime | sed 's/.*load average: //')

[ -n "$small" ] && echo "(BENCH_SMALL: every width shrunk to d_model 64; these are not the real shapes)"
# The vocabulary view's vectors count too: as many as the JSON's "vocab" lists (about 330 here,
# 43 G multiply-adds against the 32,000 × 4096 head).
columns=$("$python" -c "import json, sys; v = json.load(open(sys.argv[1]))['vocab']; print(len(v['units']) + len(v['updates']))" \
    "$out/llama-7b.json.out" 2>/dev/null || echo 0)
limit_line=$("$python" scripts/bench_limit.py "$dir" "$tokens" --lens --vocab-columns "$columns" --wall "$(column_of llama-7b.json 1)")
limit=$(sed -n 's/.*limit \([0-9.]*\) s.*/\1/p' <<<"$limit_line")
{
    echo "Llama-2-7B's shape, whole (32 × 4096, BF16, 13.5 GB in 2 shards), $tokens tokens, layer $layer,"
    echo "lens and prediction; medians of $runs runs; load average at the end: $load"
    echo
    echo "| route | wall (s) | CPU (s) | peak RSS (MB) | wall ÷ limit |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    for t in json summary numpy; do
        case "$t" in
            json) name="ffn-trace run --prompt --format json" ;;
            summary) name="ffn-trace run --prompt --detail summary" ;;
            numpy) name="NumPy float64, each weight converted as used (1 run)" ;;
        esac
        w=$(column_of "llama-7b.$t" 1); c=$(column_of "llama-7b.$t" 2)
        m=$(awk -v kb="$(column_of "llama-7b.$t" 3)" 'BEGIN { printf "%.0f", kb * 1024 / 1e6 }')
        x=$(awk -v a="$w" -v b="$limit" 'BEGIN { if (a == "nan" || b == "") print "—"; else printf "%.2f×", a / b }')
        echo "| $name | $w | $c | $m | $x |"
    done
} | tee "$out/llama-7b-table.md"
echo "$limit_line"

# Agreement with the NumPy route: the prediction's top 10 and the lens at the last token before
# and after layer 16's FFN, ids the same and logits to 1e-9 relative, every number finite.
"$python" - "$out" <<'EOF'
import json, math, os, sys
out = sys.argv[1]
try:
    a = json.load(open(os.path.join(out, "llama-7b.json.out")))
    b = json.load(open(os.path.join(out, "llama-7b.numpy.out")))
except (OSError, ValueError) as e:
    sys.exit(f"llama-7b: not compared ({e})")
pairs = [("prediction", a["prediction"]["top"], b["prediction"]),
         ("lens before the FFN", a["lens"][-1]["before"], b["lens_before"]),
         ("lens after the FFN", a["lens"][-1]["after"], b["lens_after"])]
ok = b["finite"]
for what, ours, theirs in pairs:
    ids_same = [t["id"] for t in ours][:10] == [i for i, _ in theirs]
    worst = max(abs(t["logit"] - v) / max(abs(v), 1e-300) for t, (_, v) in zip(ours, theirs))
    finite = all(math.isfinite(t["logit"]) for t in ours)
    ok = ok and ids_same and worst < 1e-9 and finite
    print(f"llama-7b {what} at the last token: top-10 ids {'the same' if ids_same else 'DIFFERENT'}, "
          f"largest relative difference of the logits {worst:.2g}{'' if finite else ', NOT FINITE'}")
print(f"llama-7b: ffn-trace and NumPy float64 {'agree' if ok else 'DISAGREE'} to 1e-9; top prediction "
      f"{a['prediction']['top'][0]['token']!r} (id {a['prediction']['top'][0]['id']}); NumPy's largest |stream value| "
      f"{b['largest_stream_value']:.4g}, its pass {b['wall_seconds']} s inside python")
EOF
echo "(outputs, stderr and every run's times in $out)"
