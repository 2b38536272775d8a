#!/usr/bin/env bash
# Runs every libFuzzer target of build-fuzz/ for SECONDS in all (default 60, at most 180), split
# evenly between them: the example target, seeded with data/ and the hostile corpus, and one
# target per checkpoint reader, each seeded with the test files of its format. New inputs go to
# a scratch folder, not into the repository. A crash, a sanitizer report, a timeout (10 s on one
# input) or an allocation past the rss limit (2 GB) is written to build-fuzz/ and fails the run,
# after every target has had its turn.
#
#   scripts/fuzz.sh [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."
total=${1:-60}
[ "$total" -le 180 ] || total=180
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export FFN_TRACE_FUZZ_CHECKPOINTS=$PWD/tests/inputs/checkpoints
export FFN_TRACE_FUZZ_TOKENIZER=$PWD/data/models/capitals/tokenizer.json

# seed TARGET FILE...: the target's starting corpus.
seed() {
    local target=$1
    shift
    mkdir -p "$work/$target"
    local i=0 f
    for f in "$@"; do
        [ -f "$f" ] && cp "$f" "$work/$target/$i-$(basename "$f")" && i=$((i + 1))
    done
}
seed ffn_trace_fuzz data/*.json tests/corpus/*.json tests/inputs/*.json
seed fuzz_safetensors tests/inputs/checkpoints/*/model.safetensors data/models/*/model.safetensors
seed fuzz_shard_index
python3 - "$work/fuzz_shard_index/index.json" <<'PY'
import json, struct, sys
with open("tests/inputs/checkpoints/gpt2/model.safetensors", "rb") as f:
    names = [k for k in json.loads(f.read(struct.unpack("<Q", f.read(8))[0])) if k != "__metadata__"]
with open(sys.argv[1], "w") as f:
    json.dump({"metadata": {"total_size": 0}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}, f)
PY
seed fuzz_config tests/inputs/checkpoints/*/config.json data/models/*/config.json tests/inputs/prompt/*/config.json
seed fuzz_npy tests/inputs/numpy/*.npy tests/inputs/checkpoints/*.npy
seed fuzz_npz tests/inputs/numpy/*.npz
seed fuzz_gguf
python3 tests/inputs/gguf/convert.py tests/inputs/checkpoints/gpt2 "$work/fuzz_gguf/gpt2.gguf" 2>/dev/null ||
    python3 tests/inputs/gguf/convert.py data/models/capitals "$work/fuzz_gguf/capitals.gguf"
seed fuzz_vocab tests/inputs/checkpoints/gpt2/vocab.json
seed fuzz_tokenizer_json data/models/*/tokenizer.json tests/inputs/prompt/*/tokenizer.json
seed fuzz_tokenizer_encode data/*.json README.md
targets=(ffn_trace_fuzz fuzz_safetensors fuzz_shard_index fuzz_config fuzz_npy fuzz_npz fuzz_gguf fuzz_vocab fuzz_tokenizer_json
         fuzz_tokenizer_encode)
each=$((total / ${#targets[@]}))
[ "$each" -ge 1 ] || each=1

failed=()
for target in "${targets[@]}"; do
    echo "== $target: ${each} s"
    if ! ./build-fuzz/"$target" "$work/$target" -max_total_time="$each" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix=build-fuzz/"$target"- -print_final_stats=1 >"$work/$target.log" 2>&1; then
        failed+=("$target")
    fi
    tail -n 12 "$work/$target.log"
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "error: fuzzing found a crash, timeout or oversized allocation in: ${failed[*]} (inputs in build-fuzz/)" >&2
    exit 1
fi
