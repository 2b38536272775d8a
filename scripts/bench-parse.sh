#!/usr/bin/env bash
# Times reading example files whose "expect" list holds 50k, 100k and 400k claims: the array
# of objects that once cost time growing with the square of its length. Linear parsing shows
# as seconds growing like the objects (about 2× from 50k to 100k, 4× from 100k to 400k).
# A benchmark for people, not a test: nothing here fails on a slow machine.
#
#   scripts/bench-parse.sh [COUNTS...]     (default: 50000 100000 400000)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build --preset default >/dev/null
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(50000 100000 400000)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# A 2 → 3 → 2 ReLU layer that copies its input [1, 2], so the residual is [1, 2] + [1, 2] = [2, 4];
# every claim states that residual, so all hold and check prints one line.
make_file() {  # count path
    awk -v n="$1" 'BEGIN {
        printf "{\"activation\": \"relu\", \"layout\": \"in_out\", \"input\": [1, 2],\n"
        printf " \"weights\": {\"W1\": [[1, 0, 0], [0, 1, 0]], \"W2\": [[1, 0], [0, 1], [0, 0]]},\n"
        printf " \"expect\": [\n"
        for (i = 0; i < n; ++i)
            printf "  {\"step\": \"residual\", \"value\": [2, 4], \"note\": \"claim %d\"}%s\n", i, i + 1 < n ? "," : ""
        printf "]}\n"
    }' >"$2"
}

printf '%10s %12s %10s\n' objects bytes seconds
for n in "${counts[@]}"; do
    file=$dir/claims_$n.json
    make_file "$n" "$file"
    start=$(date +%s.%N)
    build/ffn-trace check "$file" --max-file-size 1000000000 >/dev/null
    end=$(date +%s.%N)
    printf '%10d %12d %10.2f\n' "$n" "$(stat -c %s "$file")" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
done
