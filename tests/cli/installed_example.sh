#!/usr/bin/env bash
# The library as another project uses it: `cmake --install` into a new prefix, examples/trace_prompt
# configured with find_package(ffn_trace) from that prefix alone and built, then run on the shipped
# model; the units it prints and their scores must be PyTorch's float64 reference
# (tests/inputs/models/capitals_reference.json, written by scripts/train_model.py).
# Usage: installed_example.sh CMAKE BUILD_DIR SOURCE_DIR PYTHON [CXX_FLAGS [LINKER_FLAGS]]
# (the tree's own flags: a library built with the sanitizers links only into a program built so)
set -euo pipefail
cmake=$1 build=$2 src=$3 python=$4 cxx_flags=${5:-} link_flags=${6:-}
work=$build/tests/installed_example  # inside the build tree, so that ccache can serve it again
rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log"

# Nothing installed points back into the source tree or the build tree, and no public header needs
# the JSON library.
if grep -rl -e "$src/include" -e "$src/src" -e "$build" "$work/prefix/lib/cmake/ffn_trace"; then
    echo "FAIL: the installed CMake package names the source or build tree" >&2; exit 1
fi
if grep -rl nlohmann "$work/prefix/include/ffn_trace"; then
    echo "FAIL: an installed header names nlohmann" >&2; exit 1
fi
# The installed headers are the library's API, by concern (core, model, analysis): no view, quiz
# or tool header, which only the front end uses.
if find "$work/prefix/include/ffn_trace" -name '*.hpp' | grep -E '/(render_[a-z_]*|quiz|worksheet|gelu_table|params|sweep|manual|text_sink)\.hpp$'; then
    echo "FAIL: a view, quiz or tool header is installed" >&2; exit 1
fi

launcher=(-DCMAKE_CXX_FLAGS="$cxx_flags" -DCMAKE_EXE_LINKER_FLAGS="$link_flags")
command -v ccache >/dev/null && launcher+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
"$cmake" -S "$src/examples/trace_prompt" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" >"$work/configure.log"
"$cmake" --build "$work/build" >"$work/build.log" || { cat "$work/build.log" >&2; exit 1; }

"$work/build/trace_prompt" "$src/data/models/capitals" 0 "The capital of France is" >"$work/out.txt"
cat "$work/out.txt"
"$python" - "$work/out.txt" "$src/tests/inputs/models/capitals_reference.json" <<'PY'
import json, re, sys
out = open(sys.argv[1]).read().splitlines()
ref = next(p for p in json.load(open(sys.argv[2]))["prompts"] if p["text"] == "The capital of France is")
want = ref["top_units"]["units"][:5]
m = re.match(r'5 tokens; the next token is " Paris"', out[0])
assert m, f"first line: {out[0]!r}"
got = [re.match(r"\s+unit (\d+)\s+activation\s+(\S+)\s+score\s+(\S+)$", line) for line in out[2:]]
assert len(got) == len(want) and all(got), f"unit lines: {out[2:]!r}"
for g, w in zip(got, want):
    assert int(g[1]) == w["unit"], f"unit {g[1]}, expected {w['unit']}"
    assert abs(float(g[3]) - w["score"]) <= 1e-4, f"unit {g[1]}: score {g[3]}, expected {w['score']:.6f}"
print("trace_prompt's units and scores are the reference's")
PY

# examples/hook_points, the hook points' own example, built against the same installed copy: what
# it prints is the in-tree test's (tests/CMakeLists.txt), so here it is the build that is tested.
"$cmake" -S "$src/examples/hook_points" -B "$work/build-hooks" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" >"$work/configure-hooks.log"
"$cmake" --build "$work/build-hooks" >"$work/build-hooks.log" || { cat "$work/build-hooks.log" >&2; exit 1; }
"$work/build-hooks/hook_points" "$src/data/models/capitals" "The capital of France is" >"$work/hooks.txt"
grep -q '^  unit 172  1.5736$' "$work/hooks.txt" || { cat "$work/hooks.txt" >&2; echo "FAIL: hook_points against the installed library" >&2; exit 1; }
grep -q 'unit 172 set to 0 at the last token: p(" Paris") 0.8862 -> 0.7893$' "$work/hooks.txt" || { cat "$work/hooks.txt" >&2; echo "FAIL: hook_points's patch against the installed library" >&2; exit 1; }
grep -q '^the same by a callback: p(" Paris") 0.7893$' "$work/hooks.txt" || { cat "$work/hooks.txt" >&2; echo "FAIL: hook_points's callback against the installed library" >&2; exit 1; }
echo "hook_points builds against the installed library, reads layer 0's mlp_post and patches a unit, declared and by a callback"
