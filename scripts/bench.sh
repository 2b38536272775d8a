#!/usr/bin/env bash
# ffn-trace against a NumPy float64 route on three FFN layers of real shape (random weights):
#   GPT-2 small layer 0 (768 → 3072, F32, 50257 × 768 tied embedding and a vocabulary), 64 tokens,
#     ffn-trace `--detail summary` text with the vocabulary view;
#   a Llama-2-7B layer (4096 → 11008 SwiGLU, BF16), 16 tokens, `--format json`;
#   a Mixtral layer (8 experts of 4096 → 14336, top-2, BF16, 2.8 GB), 1 token, `--format json`.
# Each tool runs BENCH_RUNS times (3), interleaved, on a warm page cache; the table gives the
# median wall seconds and the median peak RSS (/usr/bin/time -v), and ffn-trace / numpy. Then the
# two routes' residuals are compared (1e-9 relative). A benchmark for people, not a test.
#
#   scripts/bench.sh            (or `make bench`, which builds first)
#   BENCH_SMALL=1 scripts/bench.sh      d_model 64 and a 1000-token vocabulary: tests the script
#   BENCH_ONLY=gpt2,llama BENCH_RUNS=5 BENCH_HOLD_ALL=0 BENCH_DIR=build/bench PYTHON=/usr/bin/python3
#   FFN_TRACE=path/to/ffn-trace
#
# The checkpoints are made once into $BENCH_DIR/cache (or cache-small) and kept; delete the folder
# to make them anew. NumPy runs on OpenBLAS (libopenblas0-pthread, installed here) with
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for its command alone. BENCH_HOLD_ALL=1 (default)
# adds a second NumPy row for llama and mixtral that converts all the matrices it needs before
# multiplying (the plain way); the first NumPy row converts one matrix, uses it and frees it.
set -euo pipefail
cd "$(dirname "$0")/.."

small=${BENCH_SMALL:-0}; [ "$small" = 0 ] && small=""
runs=${BENCH_RUNS:-3}
only=${BENCH_ONLY:-gpt2,llama,mixtral}
hold_all=${BENCH_HOLD_ALL:-1}
bench_dir=${BENCH_DIR:-build/bench}
python=${PYTHON:-/usr/bin/python3}   # Debian's python3, the one python3-numpy is for
ffn=${FFN_TRACE:-./build/ffn-trace}
cache=$bench_dir/cache${small:+-small}
out=$bench_dir/out${small:+-small}

# --- what the benchmark needs: NumPy, an optimised BLAS for it, GNU time ---------------------
packages=(python3-numpy libopenblas0-pthread time)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing missing packages: ${missing[*]}"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "error: not root and no sudo: install ${missing[*]} by hand" >&2; exit 2; }
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ -x "$python" ] || { echo "error: $python not found (set PYTHON to a python3 that has numpy)" >&2; exit 2; }
"$python" -c 'import numpy' 2>/dev/null || { echo "error: $python cannot import numpy" >&2; exit 2; }
[ -x "$ffn" ] || { echo "error: $ffn not built: run make build first" >&2; exit 2; }
grep -q -- --checkpoint <<<"$("$ffn" run --help 2>/dev/null)" \
    || { echo "error: $ffn run has no --checkpoint option yet" >&2; exit 2; }

blas_link=$(update-alternatives --display libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/.*link currently points to //p')
case "$blas_link" in
    *openblas*) ;;
    *) echo "warning: NumPy's BLAS (libblas.so.3) points to ${blas_link:-nothing}, not OpenBLAS:" \
            "update-alternatives --set libblas.so.3-x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3" >&2 ;;
esac

# --- the checkpoints --------------------------------------------------------------------------
mkdir -p "$cache" "$out"
need_mb=0
for k in ${only//,/ }; do
    [ -f "$cache/$k/model.safetensors" ] && continue
    case "$k" in gpt2) need_mb=$((need_mb + 200)) ;; llama) need_mb=$((need_mb + 300)) ;; mixtral) need_mb=$((need_mb + 2900)) ;; esac
done
[ -n "$small" ] && need_mb=$((need_mb / 100))
free_mb=$(df -Pm "$cache" | awk 'NR == 2 { print $4 }')
if [ "$need_mb" -gt 0 ]; then
    echo "making checkpoints in $cache: about $need_mb MB needed, $free_mb MB free" >&2
    if [ "$free_mb" -lt $((need_mb + 500)) ]; then
        echo "error: not enough free disk for the checkpoints ($need_mb MB needed, $free_mb MB free in $cache)" >&2
        exit 2
    fi
    BENCH_SMALL=${small:+1} "$python" scripts/bench_make_checkpoints.py "$cache" --only "$only" ${small:+--small}
fi

# --- one timed run ------------------------------------------------------------------------------
# run_timed NAME STDOUT_FILE CMD...: appends "wall_seconds peak_kb status" to $out/NAME.times
run_timed() {
    local name=$1 stdout=$2; shift 2
    local tfile=$out/$name.time start end status=0
    start=$(date +%s%N)
    /usr/bin/time -v -o "$tfile" "$@" >"$stdout" 2>"$out/$name.stderr" || status=$?
    end=$(date +%s%N)
    local kb
    kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tfile")
    echo "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }') ${kb:-0} $status" >>"$out/$name.times"
    if [ "$status" -ne 0 ]; then
        echo "  $name failed (exit $status): $(grep -v '^\s*Command exited' "$out/$name.stderr" | head -c 400)" >&2
    fi
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR + 1) / 2)] }'; }
wall_of() { awk '$3 == 0 { print $1 }' "$out/$1.times" | median; }
rss_mb_of() { awk '$3 == 0 { printf "%.0f\n", $2 * 1024 / 1e6 }' "$out/$1.times" | median; }
failed_of() { awk '$3 != 0' "$out/$1.times" | wc -l; }

ffn_args() {  # KIND: the ffn-trace options of the timed run
    case "$1" in
        gpt2) echo "--detail summary" ;;
        *) echo "--format json" ;;
    esac
}

echo "ffn-trace: $(ldd "$ffn" 2>/dev/null | awk '/blas/ { print $1 " → " $3 }' | head -1);" \
    "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset} for it" >&2
echo "numpy: $("$python" -c 'import numpy; print(numpy.__version__)') on ${blas_link:-?}" >&2

for k in ${only//,/ }; do
    dir=$cache/$k
    rm -f "$out/$k".*.times
    # The NumPy route, with the OpenBLAS tuning variables unset for its command alone.
    numpy=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$python" scripts/bench_numpy.py "$dir" --layer 0
           --input "$dir/input.npy")
    cat "$dir/model.safetensors" >/dev/null  # a warm page cache for every run, the first too
    echo "$k: $runs runs each" >&2
    for ((r = 1; r <= runs; ++r)); do
        # shellcheck disable=SC2046
        run_timed "$k.ffn-trace" "$out/$k.ffn-trace.out" "$ffn" run --checkpoint "$dir" --layer 0 \
            --input "$dir/input.npy" $(ffn_args "$k")
        run_timed "$k.numpy" "$out/$k.numpy.out" "${numpy[@]}" --out "$out/$k.numpy.residual.npy" \
            --vocab-out "$out/$k.numpy.vocab.json"
        if [ "$hold_all" = 1 ] && [ "$k" != gpt2 ]; then
            run_timed "$k.numpy-hold" "$out/$k.numpy-hold.out" "${numpy[@]}" --hold-all
        fi
    done
done

# --- agreement: ffn-trace's residual against NumPy's --------------------------------------------
for k in ${only//,/ }; do
    if [ "$k" = gpt2 ]; then  # the timed run was text: one JSON run more, untimed
        "$ffn" run --checkpoint "$cache/$k" --layer 0 --input "$cache/$k/input.npy" --format json \
            >"$out/$k.ffn-trace.json" 2>"$out/$k.ffn-trace.json.stderr" || true
    else
        cp "$out/$k.ffn-trace.out" "$out/$k.ffn-trace.json"
    fi
done

"$python" - "$out" "$cache" "$only" >"$out/agreement.txt" <<'EOF' || true
import json, os, re, sys
import numpy as np

out, cache, only = sys.argv[1], sys.argv[2], sys.argv[3].split(",")


def steps_residual(doc):
    steps = doc.get("steps") or []
    for s in steps:
        if s.get("name") == "residual":
            return "residual", s["value"]
    if steps:
        return steps[-1].get("name", "?"), steps[-1]["value"]
    return None, None


for k in only:
    path = os.path.join(out, f"{k}.ffn-trace.json")
    ref_path = os.path.join(out, f"{k}.numpy.residual.npy")
    if not os.path.exists(ref_path):
        print(f"{k}: no NumPy residual to compare")
        continue
    ref = np.load(ref_path)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{k}: ffn-trace gave no JSON to compare ({type(e).__name__}: {str(e)[:120]})")
        continue
    name, value = steps_residual(doc)
    if value is None:
        print(f"{k}: ffn-trace's JSON has no steps (keys: {', '.join(list(doc)[:20])})")
        continue
    got = np.asarray(value, dtype=np.float64).reshape(ref.shape)
    diff = np.abs(got - ref)
    scale = np.abs(ref).max()
    ok = bool(np.all(diff <= 1e-9 * np.abs(ref) + 1e-12 * scale))
    rel = diff / np.maximum(np.abs(ref), 1e-12 * scale)
    worst = np.unravel_index(np.argmax(rel), rel.shape)
    print(f"{k}: step \"{name}\" {got.shape}: largest |ffn-trace − numpy| {diff.max():.3g}"
          f" ({diff.max() / scale:.3g} of the largest value; largest relative {rel.max():.3g},"
          f" at an element of {ref[worst]:.3g}): {'agree' if ok else 'DISAGREE'} to 1e-9 relative"
          f" (|a − b| ≤ 1e-9·|b| + 1e-12·max|b|)")
    if k == "mixtral" and "routing" in doc:
        try:
            with open(os.path.join(out, f"{k}.numpy.out")) as f:
                line = json.loads(f.readline())
            mine = [r["experts"] for r in line.get("routing", [])]
            theirs = [r.get("experts") for r in doc["routing"]]
            print(f"{k}: routing ffn-trace {theirs} numpy {mine}: {'same' if mine == theirs else 'DIFFERENT'}")
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"{k}: routing not compared ({e})")
    if k == "gpt2" and "vocab" in doc:
        # The JSON's top units and vocabulary view against NumPy's, id for id.
        try:
            with open(os.path.join(out, f"{k}.numpy.vocab.json")) as f:
                view = json.load(f)
            ids = lambda items: [e["unit"] if "unit" in e else e["id"] for e in items]
            top_same = [ids(t) for t in doc.get("top_units", [])] == view["top_units"]
            units = doc["vocab"].get("units", [])
            unit_diff = [u["unit"] for u in units
                         if ids(u.get("promotes", [])) != view["promotes"].get(str(u["unit"]))
                         or ids(u.get("suppresses", [])) != view["suppresses"].get(str(u["unit"]))]
            missing = sorted(set(map(int, view["promotes"])) - {u["unit"] for u in units})
            updates = doc["vocab"].get("updates", [])
            upd_diff = [t for t, u in enumerate(updates)
                        if ids(u.get("promotes", [])) != view["update_promotes"][t]
                        or ("suppresses" in u and ids(u["suppresses"]) != view["update_suppresses"][t])]
            print(f"gpt2: JSON top units per token {'same as' if top_same else 'DIFFERENT from'} numpy's;"
                  f" vocabulary view: {len(units)} units, {len(unit_diff)} with different tokens"
                  f"{' (' + ', '.join(map(str, unit_diff[:10])) + ')' if unit_diff else ''},"
                  f" {len(missing)} of numpy's units missing; {len(updates)} token updates,"
                  f" {len(upd_diff)} different")
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            print(f"gpt2: JSON vocabulary view not compared ({type(e).__name__}: {e})")
    if k == "gpt2":
        # The vocabulary view: are token 0's top unit and the tokens it promotes in the text output?
        try:
            with open(os.path.join(out, f"{k}.numpy.vocab.json")) as f:
                view = json.load(f)
            with open(os.path.join(cache, k, "vocab.json"), encoding="utf-8") as f:
                names = {v: t for t, v in json.load(f).items()}
            with open(os.path.join(out, f"{k}.ffn-trace.out"), encoding="utf-8", errors="replace") as f:
                text = f.read().replace("\u0120", " ").replace("\u2581", " ")  # Ġ or ▁: a leading space
            unit = view["top_units"][0][0]
            words = [names[j].replace("\u0120", "") for j in view["promotes"][str(unit)]]
            # a token counts as shown when it stands alone (no letter either side) in the text
            found = sum(1 for w in words
                        if len(w) >= 2 and re.search(r"(?<![^\W\d_])" + re.escape(w) + r"(?![^\W\d_])", text))
            print(f"gpt2: token 0's top unit (numpy) is {unit}; the 10 tokens it promotes most per numpy:"
                  f" {' '.join(repr(names[j]) for j in view['promotes'][str(unit)])};"
                  f" {found} of the {sum(1 for w in words if len(w) >= 2)} of 2+ letters appear in ffn-trace's text output"
                  f" ({'vocabulary view present' if found >= 0.8 * sum(1 for w in words if len(w) >= 2) else 'vocabulary view MISSING or different'})")
        except (OSError, ValueError, KeyError, IndexError) as e:
            print(f"gpt2: vocabulary view not compared ({e})")
EOF

# --- the table -----------------------------------------------------------------------------------
label() {  # KIND: the layer's shapes, read from its config.json
    "$python" - "$cache/$1/config.json" "$cache/$1/input.npy" <<'EOF'
import json, sys
import numpy as np
c = json.load(open(sys.argv[1]))
t = np.load(sys.argv[2], mmap_mode="r").shape[0]
k = c["model_type"]
if k == "gpt2":
    print(f"GPT-2 small layer ({c['n_embd']} → {c['n_inner']}, F32, vocab view over {c['vocab_size']}), {t} tokens")
elif k == "llama":
    print(f"Llama-2-7B layer ({c['hidden_size']} → {c['intermediate_size']} SwiGLU, BF16), {t} tokens")
else:
    print(f"Mixtral layer ({c['num_local_experts']} × {c['hidden_size']} → {c['intermediate_size']},"
          f" top-{c['num_experts_per_tok']}, BF16), {t} token{'s' if t != 1 else ''}")
EOF
}
[ -n "$small" ] && echo "(BENCH_SMALL: every width shrunk to d_model 64; these are not the real shapes)"
{
    echo "| layer | tool | median wall (s) | peak RSS (MB) | ffn-trace / this (wall, RSS) |"
    echo "| --- | --- | ---: | ---: | --- |"
    for k in ${only//,/ }; do
        fw=$(wall_of "$k.ffn-trace"); fr=$(rss_mb_of "$k.ffn-trace")
        tools=("ffn-trace" "numpy")
        [ "$hold_all" = 1 ] && [ "$k" != gpt2 ] && tools+=("numpy-hold")
        lab=$(label "$k")
        for t in "${tools[@]}"; do
            w=$(wall_of "$k.$t"); m=$(rss_mb_of "$k.$t"); f=$(failed_of "$k.$t")
            case "$t" in
                ffn-trace) name="ffn-trace"; ratio="" ;;
                numpy) name="numpy float64 (one matrix at a time)"
                       ratio=$(awk -v a="$fw" -v b="$w" -v c="$fr" -v d="$m" 'BEGIN { if (a == "nan" || b == "nan") print "—"; else printf "%.2f×, %.2f×", a / b, c / d }') ;;
                numpy-hold) name="numpy float64 (all needed matrices held)"
                       ratio=$(awk -v a="$fw" -v b="$w" -v c="$fr" -v d="$m" 'BEGIN { if (a == "nan" || b == "nan") print "—"; else printf "%.2f×, %.2f×", a / b, c / d }') ;;
            esac
            [ "$f" -gt 0 ] && name="$name ($f of $runs runs failed)"
            [ "$w" = nan ] && { w="—"; m="—"; }
            echo "| $lab | $name | $w | $m | $ratio |"
        done
    done
} | tee "$out/table.md"

if [[ ",$only," == *,mixtral,* ]]; then
    "$python" - "$cache/mixtral/config.json" "$(rss_mb_of mixtral.ffn-trace)" <<'EOF' | tee -a "$out/table.md"
import json, sys
c = json.load(open(sys.argv[1]))
e, d, f = c["num_local_experts"], c["hidden_size"], c["intermediate_size"]
all_mb = e * 3 * d * f * 8 / 1e6
peak = sys.argv[2]
share = "—" if peak == "nan" else f"{float(peak) / all_mb * 100:.1f} %"
print(f"\nMixtral: converting all {e} experts to float64 would take {e} × 3 × {d} × {f} × 8 bytes ="
      f" {all_mb:,.0f} MB; ffn-trace's peak RSS is {peak} MB, {share} of it (target: under 40 %).")
EOF
fi
echo
cat "$out/agreement.txt"
if [ -s "$out/gpt2.numpy.out" ] || [ -s "$out/llama.numpy.out" ] || [ -s "$out/mixtral.numpy.out" ]; then
    "$python" - "$out" "$only" <<'EOF'
import json, os, sys
out, only = sys.argv[1], sys.argv[2].split(",")
for k in only:
    try:
        line = json.loads(open(os.path.join(out, f"{k}.numpy.out")).readline())
    except (OSError, ValueError):
        continue
    b = line.get("blas", {})
    print(f"numpy {k}: {line['wall_seconds']} s inside python (the import of numpy included), "
          f"BLAS {b.get('library')} core {b.get('openblas_core')} with {b.get('threads')} threads")
EOF
fi
echo "(outputs, stderr and every run's times in $out)"
