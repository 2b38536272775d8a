#!/usr/bin/env bash
# Checks ffn-trace against llama.cpp itself on a GGUF file: every FFN node of every layer, the
# logits and the token ids of a prompt, then the token ids of more texts. Needs a llama.cpp source
# tree and a CPU build of it (llama-eval-callback, llama-tokenize; see docs/building.md); not run
# by the tests, which need no llama.cpp.
#
#   scripts/compare-llama-cpp.sh MODEL.gguf PROMPT [LLAMA_MODEL.gguf] [-- TEXT...]
#
# LLAMA_MODEL is the file llama.cpp runs when it is not MODEL itself: a twin holding the same
# numbers (a quantized file's F32 copy made by llama-quantize, or an architecture this llama.cpp
# names differently). The texts after -- are tokenized by both, special tokens matched.
#
# Environment: LLAMA_CPP_SRC (/work/llama.cpp-src), LLAMA_CPP_BUILD (/work/llama.cpp-build),
# LLAMA_CPP_BIN (its libraries and programs: LLAMA_CPP_BUILD/bin), FFN_TRACE (build/ffn-trace).
# A prebuilt llama.cpp serves too (node-llama-cpp's, with the source of its release: docs/building.md):
# its libraries named libllama.v*.so and its CPU backends loaded at run time, without llama-eval-callback.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=${LLAMA_CPP_SRC:-/work/llama.cpp-src}
bin=${LLAMA_CPP_BIN:-${LLAMA_CPP_BUILD:-/work/llama.cpp-build}/bin}
ffn=${FFN_TRACE:-$here/../build/ffn-trace}
py=/usr/bin/python3

if [ $# -lt 2 ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
model=$1 prompt=$2
shift 2
theirs=$model
if [ $# -gt 0 ] && [ "$1" != "--" ]; then theirs=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift

# The dump program: llama-eval-callback's callback writing whole tensors (scripts/llama_cpp_dump.cpp).
dump=$bin/llama-cpp-dump
if [ ! -x "$dump" ] || [ "$here/llama_cpp_dump.cpp" -nt "$dump" ]; then
    libs=() defines=()
    for lib in llama ggml ggml-base; do  # libllama.so, or a release's libllama.v0.4.0.so
        found=$(ls "$bin/lib$lib.so" "$bin/lib$lib".v*.so 2>/dev/null | head -n 1 || true)
        libs+=("-l:$(basename "${found:-lib$lib.so}")")
    done
    ls "$bin"/libggml-cpu*.so > /dev/null 2>&1 && defines+=("-DLLAMA_CPP_BACKENDS=\"$bin\"")
    grep -q flash_attn_type "$src/include/llama.h" && defines+=(-DLLAMA_CPP_FLASH_ATTN_TYPE)
    g++ -O2 -std=c++17 "$here/llama_cpp_dump.cpp" "${defines[@]}" -I"$src/include" -I"$src/ggml/include" \
        -L"$bin" "${libs[@]}" -Wl,-rpath,"$bin" -o "$dump"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dump" "$theirs" "$prompt" "$work/nodes.bin"
# llama-eval-callback itself on the same file, to show that the dump holds the numbers it prints.
callback=()
if [ -x "$bin/llama-eval-callback" ]; then
    "$bin/llama-eval-callback" -m "$theirs" -p "$prompt" -ctk f32 -ctv f32 -t 2 --seed 1 \
        > "$work/eval-callback.txt" 2>&1 || true
    callback=("$work/eval-callback.txt")
fi
"$py" "$here/compare_llama_cpp.py" "$ffn" "$model" "$work/nodes.bin" "$prompt" "$(basename "$model")" \
    "${callback[@]}"

for text in "$@"; do
    ours=$("$ffn" tokenize --checkpoint "$model" --format json "$text" |
        "$py" -c 'import json, sys; print(json.load(sys.stdin)["token_ids"])')
    them=$("$bin/llama-tokenize" -m "$theirs" -p "$text" --ids --log-disable 2>/dev/null | tail -n 1)
    if [ "$ours" = "$them" ]; then verdict=same; else verdict="DIFFER: llama.cpp $them"; fi
    shown=$(printf '%s' "$text" | "$py" -c 'import json, sys; print(json.dumps(sys.stdin.read(), ensure_ascii=False))')
    printf '%s\ttokenize\t%s\t%s\t%s\n' "$(basename "$model")" "$shown" "$ours" "$verdict"
done
