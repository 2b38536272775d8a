#!/usr/bin/env bash
# Times what grows with the layer: `grad` and `run --detail summary` against `run --format json`
# on the same example file, for GELU layers of 256 → 1024 with 1 and 8 tokens and 768 → 3072
# (GPT-2's width) with 1 and 64 tokens, random weights and a target. The ratios are what to read: grad ≤ 3× run json,
# run summary ≤ 1.1× run json. Each command runs BENCH_RUNS times (3); the table gives medians.
# A benchmark for people, not a test: nothing here fails on a slow machine.
#
#   scripts/bench-scale.sh            (or `make bench-scale`, which builds first)
#   BENCH_RUNS=5 FFN_TRACE=path/to/ffn-trace scripts/bench-scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_RUNS:-3}
ffn=${FFN_TRACE:-./build/ffn-trace}
[ -x "$ffn" ] || { echo "error: $ffn not built: run make build first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

make_file() {  # d_model d_ff tokens path
    awk -v d="$1" -v f="$2" -v n="$3" 'BEGIN {
        srand(7)
        printf "{\"activation\": \"gelu\", \"layout\": \"in_out\", \"residual\": true,\n"
        printf " \"weights\": {\"W1\": ["
        for (i = 0; i < d; ++i) {
            printf "%s[", i ? ",\n" : ""
            for (j = 0; j < f; ++j) printf "%s%.6f", j ? "," : "", (rand() - 0.5) * 0.1
            printf "]"
        }
        printf "],\n \"W2\": ["
        for (i = 0; i < f; ++i) {
            printf "%s[", i ? ",\n" : ""
            for (j = 0; j < d; ++j) printf "%s%.6f", j ? "," : "", (rand() - 0.5) * 0.1
            printf "]"
        }
        printf "]},\n"
        for (k = 0; k < 2; ++k) {
            printf " \"%s\": [", k ? "target" : "input"
            for (t = 0; t < n; ++t) {
                printf "%s[", t ? "," : ""
                for (i = 0; i < d; ++i) printf "%s%.6f", i ? "," : "", rand() * 2 - 1
                printf "]"
            }
            printf "]%s\n", k ? "" : ","
        }
        printf "}\n"
    }' >"$4"
}

median_seconds() {  # command...: the median wall time of $runs runs, output discarded
    local times=()
    for ((r = 0; r < runs; ++r)); do
        local start end
        start=$(date +%s.%N)
        "$@" >/dev/null
        end=$(date +%s.%N)
        times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

limits=(--max-file-size 1000000000 --max-elements 1000000000)
echo "| layer | tokens | run --format json (s) | run --detail summary (s) | grad --format json (s) | grad --detail summary (s) | summary ÷ json | grad ÷ json |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for shape in "256 1024 1" "256 1024 8" "768 3072 1" "768 3072 64"; do
    read -r d f n <<<"$shape"
    file=$dir/layer_${d}_${f}_${n}.json
    make_file "$d" "$f" "$n" "$file"
    json=$(median_seconds "$ffn" run "$file" --format json "${limits[@]}")
    summary=$(median_seconds "$ffn" run "$file" --detail summary "${limits[@]}")
    grad_json=$(median_seconds "$ffn" grad "$file" --format json "${limits[@]}")
    grad_summary=$(median_seconds "$ffn" grad "$file" --detail summary "${limits[@]}")
    awk -v d="$d" -v f="$f" -v n="$n" -v j="$json" -v s="$summary" -v g="$grad_json" -v gs="$grad_summary" 'BEGIN {
        g_max = g > gs ? g : gs
        printf "| %d → %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f× | %.2f× |\n", d, f, n, j, s, g, gs, s / j, g_max / j
    }'
done
