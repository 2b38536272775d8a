#!/usr/bin/env bash
# Checks ffn-trace's next-token distribution against a recent llama.cpp's, which knows the gemma3
# and qwen3 architectures that the llama.cpp of scripts/compare-llama-cpp.sh (February 2025) predates:
# the prebuilt CPU build that the npm package node-llama-cpp 3.21.1 ships. Installs the package into
# build/node-llama-cpp on first use (about 85 MB: the package and its linux-x64 binary, none of its
# GPU builds; nothing is built or fetched at run time), then runs scripts/compare_node_llama_cpp.mjs.
# Not run by the tests.
#
#   scripts/compare-node-llama-cpp.sh OUT_DIR [FILE[=LLAMA_FILE]...] [-- PROMPT...]
#
# Without files: writes scripts/llama_cpp_models.py's Gemma 3 and Qwen3 models and their variants,
# with their F16 and Q8_0 copies, and the Llama 3, Phi-3 and Gemma 2 models as a control, into
# OUT_DIR (once), and compares them all (the table of docs/building.md; a few minutes).
#
# Environment: FFN_TRACE (build/ffn-trace), NODE_LLAMA_CPP (build/node-llama-cpp), LLAMA_CPP_SRC
# (the llama.cpp tree whose gguf-py writes the models; see llama_cpp_models.py).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: $0 OUT_DIR [FILE[=LLAMA_FILE]...] [-- PROMPT...]}
shift
modules=${NODE_LLAMA_CPP:-$here/../build/node-llama-cpp}
export NODE_LLAMA_CPP=$modules

if [ ! -f "$modules/node_modules/@node-llama-cpp/linux-x64/package.json" ]; then
    echo "installing node-llama-cpp 3.21.1 into $modules" >&2
    mkdir -p "$modules"
    [ -f "$modules/package.json" ] || echo '{"private": true}' > "$modules/package.json"
    # the CPU binary as a package of its own, every optional GPU build left out; no install script
    # (it would look for a binary to download or build)
    (cd "$modules" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --save-exact --omit=optional --ignore-scripts \
        --no-audit --no-fund node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1 >&2)
fi

files=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do files+=("$1"); shift; done
if [ ${#files[@]} -eq 0 ]; then
    families=(gemma3 gemma3-gate gemma3-global gemma3-base qwen3 qwen3-spread llama3 phi3 gemma2)
    for family in "${families[@]}"; do
        [ -f "$out/$family-F32.gguf" ] || /usr/bin/python3 "$here/llama_cpp_models.py" make "$out" "$family"
        files+=("$out/$family-F32.gguf")
    done
    # a copy in F16 or Q8_0 is compared with llama.cpp on the F32 copy of its numbers, and on itself
    for copy in gemma3-F16 gemma3-Q8_0 qwen3-spread-F16 qwen3-spread-Q8_0; do
        files+=("$out/$copy.gguf=$out/$copy.f32.gguf")
    done
fi
exec node "$here/compare_node_llama_cpp.mjs" "${files[@]}" "$@"
