#!/usr/bin/env bash
# Writes a checkpoint whose tokenizer is broken in one way (or is one ffn-trace had refused), then
# runs the command, which names it as $CASE_DIR.
#
#   tokenizer_case.sh CASE DIR INPUTS COMMAND [ARGS...]
#
# CASE: no_merges (GPT-2's vocab.json without merges.txt), wordpiece_no_unk (BERT with a WordPiece
# tokenizer.json whose unk_token is not in its vocabulary), or gguf:PRE[:BOS] (the GPT-2 test
# checkpoint as a GGUF file whose tokenizer.ggml.pre is PRE, written by tests/inputs/gguf/convert.py).
# DIR is the test's own: ctest runs tests side by side.
set -eu
case_name=$1 dir=$2 inputs=$3
shift 3
rm -rf "$dir"
mkdir -p "$dir"
case "$case_name" in
    no_merges)
        cp "$inputs"/checkpoints/gpt2/{config.json,model.safetensors,vocab.json} "$dir"/
        CASE_DIR=$dir ;;
    wordpiece_no_unk)
        cp "$inputs"/checkpoints/bert/{config.json,model.safetensors} "$dir"/
        cat > "$dir"/tokenizer.json <<'JSON'
{"model": {"type": "WordPiece", "unk_token": "[UNK]",
           "vocab": {"[CLS]": 0, "[SEP]": 1, "paris": 2, "london": 3, "the": 4, "capital": 5, "of": 6, "##s": 7}}}
JSON
        CASE_DIR=$dir ;;
    gguf:*)
        IFS=: read -r _ pre bos <<< "$case_name"
        python3 "$inputs"/gguf/convert.py "$inputs"/checkpoints/gpt2 "$dir"/model.gguf "$pre" ${bos:+"$bos"}
        CASE_DIR=$dir/model.gguf ;;
    *) echo "tokenizer_case.sh: unknown case $case_name"; exit 1 ;;
esac
args=()
for a in "$@"; do args+=("${a//@CASE@/$CASE_DIR}"); done
exec "${args[@]}"
