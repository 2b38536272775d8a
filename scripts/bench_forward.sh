#!/usr/bin/env bash
# The forward pass of ffn-trace against the same arithmetic written plainly in PyTorch float64
# (scripts/bench_forward.py) on the same files, with random weights of real shape:
#   GPT-2 small (12 layers of 768, F32, tied 50257 × 768 head), a 32-token prompt, layer 11;
#   Llama-2-7B cut to 2 layers (4096, 11008 SwiGLU, BF16, 32000 × 4096 lm_head), 32 tokens, layer 1.
# ffn-trace runs `run --checkpoint DIR --layer N --prompt TEXT --format json`: every block, the
# final norm and the prediction, the logit lens before and after layer N's FFN at every token,
# each unit's attribution and the vocabulary view. The checkpoints get a byte-level vocabulary
# (scripts/bench_byte_vocab.py), so the prompt of 32 letters is 32 tokens; PyTorch runs the same
# ids and, with --prompt-work, the same lens, attribution and vocabulary view.
# Each route runs BENCH_RUNS times (3), interleaved, on a warm page cache; the table gives the median
# wall seconds (the process, PyTorch's import included), the median CPU seconds (user + system) and
# the median peak RSS (/usr/bin/time -v), then whether the two routes' predictions agree, and each
# case's arithmetic against this machine's dgemm rate (the limit, scripts/bench_limit.py). A
# benchmark for people, not a test.
#
#   scripts/bench_forward.sh     (make bench runs it after scripts/bench.sh)
#   BENCH_SMALL=1 BENCH_RUNS=1 BENCH_HOLD_ALL=0 BENCH_DIR=build/bench PYTHON=/usr/bin/python3
#
# PyTorch runs two ways: every weight converted to float64 first (as model.double() holds a model:
# BENCH_HOLD_ALL=1, the default) and each weight converted as it is used (--one-at-a-time).
set -euo pipefail
cd "$(dirname "$0")/.."

small=${BENCH_SMALL:-0}; [ "$small" = 0 ] && small=""
runs=${BENCH_RUNS:-3}
hold_all=${BENCH_HOLD_ALL:-1}
bench_dir=${BENCH_DIR:-build/bench}
python=${PYTHON:-/usr/bin/python3}   # Debian's python3, the one python3-torch is for
ffn=${FFN_TRACE:-./build/ffn-trace}
cache=$bench_dir/cache${small:+-small}
out=$bench_dir/out${small:+-small}

"$python" -c 'import torch, numpy' 2>/dev/null \
    || { echo "error: $python cannot import torch and numpy (apt-get install python3-torch python3-numpy)" >&2; exit 2; }
[ -x "$ffn" ] || { echo "error: $ffn not built: cmake --build --preset default --target ffn-trace" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time not found (apt-get install time)" >&2; exit 2; }

mkdir -p "$cache" "$out"
BENCH_SMALL=${small:+1} "$python" scripts/bench_make_checkpoints.py "$cache" --only gpt2-forward,llama-forward ${small:+--small}

run_timed() {  # NAME STDOUT CMD...: appends "wall_seconds peak_kb status" to $out/NAME.times
    local name=$1 stdout=$2; shift 2
    local start end status=0 kb cpu
    start=$(date +%s%N)
    /usr/bin/time -v -o "$out/$name.time" "$@" >"$stdout" 2>"$out/$name.stderr" || status=$?
    end=$(date +%s%N)
    kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$out/$name.time")
    cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.2f", u + s }' "$out/$name.time")
    echo "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }') ${kb:-0} $status $cpu" >>"$out/$name.times"
    [ "$status" -eq 0 ] || echo "  $name failed (exit $status): $(head -c 400 "$out/$name.stderr")" >&2
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR + 1) / 2)] }'; }
wall_of() { awk '$3 == 0 { print $1 }' "$out/$1.times" | median; }
cpu_of() { awk '$3 == 0 { print $4 }' "$out/$1.times" | median; }
rss_mb_of() { awk '$3 == 0 { printf "%.0f\n", $2 * 1024 / 1e6 }' "$out/$1.times" | median; }

declare -A layer=([gpt2-forward]=11 [llama-forward]=1)
prompt=$(head -c 32 < <(yes abcdefghijklmnopqrstuvwxyz | tr -d '\n'))  # 32 letters, 32 tokens
ids=$("$python" -c "import sys; print(','.join(str(b) for b in sys.argv[1].encode()))" "$prompt")
for k in gpt2-forward llama-forward; do
    dir=$cache/$k
    pdir=$cache/${k%-forward}-prompt  # the same weights with a byte-level vocabulary
    mkdir -p "$pdir"
    ln -sf "$(cd "$dir" && pwd)/model.safetensors" "$pdir/model.safetensors"
    cp "$dir/config.json" "$pdir/config.json"
    "$python" scripts/bench_byte_vocab.py "$pdir"
    rm -f "$out/$k".*.times
    cat "$dir/model.safetensors" >/dev/null  # a warm page cache for every run, the first too
    echo "$k: $runs runs each" >&2
    for ((r = 1; r <= runs; ++r)); do
        run_timed "$k.ffn-trace" "$out/$k.ffn-trace.out" "$ffn" run --checkpoint "$pdir" --layer "${layer[$k]}" \
            --prompt "$prompt" --format json
        run_timed "$k.torch-each" "$out/$k.torch-each.out" "$python" scripts/bench_forward.py "$dir" "${layer[$k]}" "$ids" \
            --one-at-a-time --prompt-work
        [ "$hold_all" = 1 ] && run_timed "$k.torch-hold" "$out/$k.torch-hold.out" "$python" scripts/bench_forward.py "$dir" \
            "${layer[$k]}" "$ids" --prompt-work
    done
done

label() {
    case "$1" in
        gpt2-forward) echo "GPT-2 small (12 × 768, F32), 32 tokens, layer 11" ;;
        llama-forward) echo "Llama-2-7B cut to 2 layers (4096, BF16), 32 tokens, layer 1" ;;
    esac
}
[ -n "$small" ] && echo "(BENCH_SMALL: every width shrunk to d_model 64; these are not the real shapes)"
{
    echo "| model | route | median wall (s) | CPU (s) | peak RSS (MB) | ffn-trace / this (wall, RSS) |"
    echo "| --- | --- | ---: | ---: | ---: | --- |"
    for k in gpt2-forward llama-forward; do
        fw=$(wall_of "$k.ffn-trace"); fr=$(rss_mb_of "$k.ffn-trace")
        routes=(ffn-trace torch-each); [ "$hold_all" = 1 ] && routes+=(torch-hold)
        for t in "${routes[@]}"; do
            w=$(wall_of "$k.$t"); m=$(rss_mb_of "$k.$t"); c=$(cpu_of "$k.$t")
            case "$t" in
                ffn-trace) name="ffn-trace run --prompt --format json"; ratio="" ;;
                torch-each) name="PyTorch float64, each weight converted as used" ;;
                torch-hold) name="PyTorch float64, every weight converted first" ;;
            esac
            [ "$t" != ffn-trace ] && ratio=$(awk -v a="$fw" -v b="$w" -v c="$fr" -v d="$m" \
                'BEGIN { if (a == "nan" || b == "nan") print "—"; else printf "%.2f×, %.2f×", a / b, c / d }')
            echo "| $(label "$k") | $name | $w | $c | $m | $ratio |"
        done
    done
} | tee "$out/forward-table.md"

# The limit: the case's multiply-adds at this machine's own dgemm rate, measured now (under the
# same load as the runs above), and ffn-trace's median as a multiple of it (scripts/bench_limit.py).
uptime | sed 's/^/load: /'
for k in gpt2-forward llama-forward; do
    columns=$("$python" -c "import json, sys; v = json.load(open(sys.argv[1]))['vocab']; print(len(v['units']) + len(v['updates']))" \
        "$out/$k.ffn-trace.out" 2>/dev/null || echo 0)
    "$python" scripts/bench_limit.py "$cache/$k" 32 --lens --vocab-columns "$columns" --wall "$(wall_of "$k.ffn-trace")"
done

# Agreement: the top 10 of the last position, ids the same and logits to 1e-9 relative.
"$python" - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
for k in ("gpt2-forward", "llama-forward"):
    try:
        a = json.load(open(os.path.join(out, f"{k}.ffn-trace.out")))
        b = json.load(open(os.path.join(out, f"{k}.torch-each.out")))
    except (OSError, ValueError) as e:
        print(f"{k}: not compared ({e})")
        continue
    mine = [(e["id"], e["logit"]) for e in a["prediction"]["top"]]
    same_ids = [i for i, _ in mine] == [i for i, _ in b["top"]]
    worst = max(abs(x - y) / max(abs(y), 1e-300) for (_, x), (_, y) in zip(mine, b["top"]))
    lens_ids = [e["id"] for e in a["lens"][-1]["after"]] == b["lens_last_after_top"]
    print(f"{k}: top-10 ids {'the same' if same_ids else 'DIFFERENT'}, largest relative difference of their"
          f" logits {worst:.2g}; the lens's top 10 after the FFN at the last token {'the same' if lens_ids else 'DIFFERENT'}:"
          f" {'agree' if same_ids and lens_ids and worst < 1e-9 else 'DISAGREE'} to 1e-9")
    for route in ("torch-each", "torch-hold"):
        try:
            inside = json.load(open(os.path.join(out, f"{k}.{route}.out")))["wall_seconds"]
            print(f"{k}: {route}'s last run took {inside} s inside python after importing torch (its compute)")
        except (OSError, ValueError, KeyError):
            pass
EOF
echo "(outputs, stderr and every run's times in $out)"
