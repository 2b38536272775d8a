#!/usr/bin/env bash
# The shipped model written as a GGUF file (tests/inputs/gguf/convert.py) gives what its
# safetensors directory gives, byte for byte once the checkpoint's path is the same: the prompt's
# walkthrough and its JSON, the tokens, a layer on embedding rows and on a word, causal tracing
# and the units over a corpus. Prints "same" when every pair agrees.
#
#   gguf_same.sh FFN_TRACE CONVERT_PY MODEL_DIR CORPUS
set -euo pipefail
ft=$1 convert=$2 model=$3 corpus=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$convert" "$model" "$work/model.gguf"
cp "$work/model.gguf" "$work/blob"  # an Ollama blob: no extension
runs=(
    "run --layer 0 --prompt 'The capital of France is' --format json"
    "run --layer 1 --prompt 'The capital of France is' --detail summary --color never"
    "run --layer 0 --embedding 3,5 --format json"
    "run --layer 1 --word ' Paris' --detail summary --color never"
    "locate --prompt 'The capital of France is' --subject France --samples 2 --format json"
    "units --layer 0 --corpus '$corpus' --format json"
)
for args in "${runs[@]}"; do
    for ck in "$model" "$work/model.gguf" "$work/blob"; do
        eval "\"$ft\" $args --checkpoint \"$ck\"" 2>&1 | sed "s|$ck|CHECKPOINT|g" >"$work/out.$(basename "$ck")" || true
    done
    for other in model.gguf blob; do
        if ! cmp -s "$work/out.$(basename "$model")" "$work/out.$other"; then
            echo "differs: $args on $other"
            diff "$work/out.$(basename "$model")" "$work/out.$other" | head -20
            exit 1
        fi
    done
done
for text in "The capital of France is Paris." "<|endoftext|>Hello  world"; do
    a=$("$ft" tokenize --checkpoint "$model" "$text")
    b=$("$ft" tokenize --checkpoint "$work/model.gguf" "$text")
    [ "$a" = "$b" ] || { echo "tokenize differs on: $text"; diff <(echo "$a") <(echo "$b"); exit 1; }
done
echo same
