#!/usr/bin/env bash
# The shipped model written as a GGUF file (tests/inputs/gguf/convert.py) gives what its
# safetensors directory gives: the JSON of the prompt's walkthrough, of a layer on embedding rows
# and on a word, of causal tracing and of the units over a corpus have the same fields, the same
# token ids and predictions, and numbers equal to 1e-9, relative or absolute (llama.cpp stores GPT-2's weights
# transposed, so the products add in another order and "layout" says "out_in"); the tokens are
# the same. Prints "same" when every pair agrees.
#
#   gguf_same.sh FFN_TRACE CONVERT_PY MODEL_DIR CORPUS WHICH
# WHICH: the index of one run below (0 to 4, run 0 on the Ollama blob too), or "tokenize".
set -euo pipefail
ft=$1 convert=$2 model=$3 corpus=$4 which=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$convert" "$model" "$work/model.gguf"
cp "$work/model.gguf" "$work/blob"  # an Ollama blob: no extension
runs=(
    "run --layer 0 --prompt 'The capital of France is' --ablate 3 --format json"
    "run --layer 1 --embedding 3,5 --format json"
    "run --layer 1 --word ' Paris' --format json"
    "locate --prompt 'The capital of France is' --subject France --samples 1 --window 1 --format json"
    "units --layer 0 --corpus '$corpus' --format json"
)
[ "$which" = tokenize ] && runs=()
for args in "${runs[@]:$which:1}"; do
    others=(model.gguf)
    [ "$which" = 0 ] && others+=(blob)  # the blob once: it is the same file
    for ck in "$model" "$work/model.gguf" "$work/blob"; do
        [ "$ck" = "$work/blob" ] && [ ${#others[@]} -eq 1 ] && continue
        eval "\"$ft\" $args --checkpoint \"$ck\"" | sed "s|$ck|CHECKPOINT|g" >"$work/out.$(basename "$ck")"
    done
    for other in "${others[@]}"; do
        python3 "$(dirname "$0")/json_same.py" "$work/out.$(basename "$model")" "$work/out.$other" 1e-9 layout >/dev/null \
            || { echo "($args)"; exit 1; }
    done
done
[ "$which" = tokenize ] || { echo same; exit 0; }
for text in "The capital of France is Paris." "<|endoftext|>Hello  world"; do
    a=$("$ft" tokenize --checkpoint "$model" "$text")
    b=$("$ft" tokenize --checkpoint "$work/model.gguf" "$text")
    [ "$a" = "$b" ] || { echo "tokenize differs on: $text"; diff <(echo "$a") <(echo "$b"); exit 1; }
done
echo same
