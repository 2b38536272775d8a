#!/usr/bin/env bash
# The families ffn-trace reads beyond Llama 2 checked against llama.cpp: small random Llama 3 (rope
# scaling "llama3"), Qwen3 and Phi-3 GGUF files with real tokenizers (scripts/llama_cpp_models.py),
# in F32 and quantized by llama-quantize, each through scripts/compare-llama-cpp.sh.
#
#   scripts/compare-llama-cpp-families.sh OUT_DIR [TYPE...]     (types: Q8_0 Q4_K_M Q6_K by default)
#
# FAMILIES="llama3 qwen3 phi3" (the default) says which; gemma2 is the fourth the model script writes.
#
# A quantized file is compared with llama.cpp on its F32 copy (llama-quantize --allow-requantize
# F32: ggml's own dequantization), since llama.cpp on the quantized file rounds each activation to
# 8 bits before the product (ggml's vec_dot); that run is shown too, as "(llama.cpp on the
# quantized file)". Qwen3 runs in llama.cpp as its openelm twin (see llama_cpp_models.py).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${LLAMA_CPP_BUILD:-/work/llama.cpp-build}/bin
out=${1:?usage: $0 OUT_DIR [TYPE...]}
shift
if [ $# -gt 0 ]; then types=("$@"); else types=(Q8_0 Q4_K_M Q6_K); fi
prompt="The capital of France is Paris, and 2024's capital of"
quiet() { "$@" > /dev/null 2>&1 || { echo "error: $* failed" >&2; exit 1; }; }

read -r -a families <<< "${FAMILIES:-llama3 qwen3 phi3}"
for family in "${families[@]}"; do
    [ -f "$out/$family-F32.gguf" ] || /usr/bin/python3 "$here/llama_cpp_models.py" make "$out" "$family"
done

texts() {
    local common=("The capital of France is" "Hello world! 123 4567 it's   spaced"$'\n\n'"new lines" "naïve café 東京 🙂")
    case $1 in
        llama3) printf '%s\0' "${common[@]}" "<|begin_of_text|><|start_header_id|>user<|end_header_id|>"$'\n\n'"Hi<|eot_id|>" ;;
        qwen3) printf '%s\0' "${common[@]}" "<|im_start|>user"$'\n'"Hi<|im_end|><|endoftext|>" ;;
        phi3) printf '%s\0' "${common[@]}" "<|user|>"$'\n'"Hi<|end|>"$'\n'"<|assistant|>" "<unk> and <s>" ;;
        *) printf '%s\0' "${common[@]}" "<unk> and <s>" ;;
    esac
}

for family in "${families[@]}"; do
    # the file llama.cpp runs for a file ffn-trace runs: itself, or Qwen3's openelm twin
    llama=$out/$family-F32.gguf
    [ "$family" = qwen3 ] && llama=$out/$family-F32.openelm.gguf
    mapfile -d '' -t words < <(texts "$family")
    "$here/compare-llama-cpp.sh" "$out/$family-F32.gguf" "$prompt" "$llama" -- "${words[@]}"
    for type in "${types[@]}"; do
        q=$out/$family-$type.gguf twin=$out/$family-$type.f32.gguf
        if [ "$family" = qwen3 ]; then
            quiet "$bin/llama-quantize" "$llama" "$out/$family-$type.openelm.gguf" "$type"
            /usr/bin/python3 "$here/llama_cpp_models.py" split-qkv "$out/$family-$type.openelm.gguf" "$q"
            quiet "$bin/llama-quantize" --allow-requantize "$out/$family-$type.openelm.gguf" "$twin" F32
            direct=$out/$family-$type.openelm.gguf
        else
            quiet "$bin/llama-quantize" "$llama" "$q" "$type"
            quiet "$bin/llama-quantize" --allow-requantize "$q" "$twin" F32
            direct=$q
        fi
        "$here/compare-llama-cpp.sh" "$q" "$prompt" "$twin"
        "$here/compare-llama-cpp.sh" "$q" "$prompt" "$direct" |
            grep 'max over layers' | sed 's/\t/ (llama.cpp on the quantized file)\t/'

    done
done
