#!/usr/bin/env bash
# Checks that a change leaves the program's behaviour byte for byte as it was at BASE_REF: builds
# BASE_REF in a temporary worktree, runs both binaries over every example of data/ and tests/inputs/
# and every hostile corpus file with each subcommand and format, and compares stdout, stderr and the
# exit status of every run. Usage: scripts/compare-builds.sh BASE_REF
# The base's worktree and build are kept in ${TMPDIR:-/tmp}/ffn-trace-base-<commit> for the next run.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 BASE_REF" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
root=$PWD
base=$(git rev-parse --verify "$1^{commit}")
base_dir=${TMPDIR:-/tmp}/ffn-trace-base-$base

# Both builds use ccache with paths relative to their own tree, so a file unchanged since BASE_REF
# compiles once.
if [[ ! -d $base_dir ]]; then
  git worktree add --detach "$base_dir" "$base" >/dev/null
fi
(cd "$base_dir" && export CCACHE_BASEDIR=$base_dir CCACHE_NOHASHDIR=true &&
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFFN_TRACE_BUILD_TESTS=OFF >/dev/null &&
  cmake --build build --target ffn-trace -j2 >/dev/null)
(export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=true && cmake --build --preset default --target ffn-trace -j2 >/dev/null)
old=$base_dir/build/ffn-trace
new=$root/build/ffn-trace

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

examples=()
for f in data/*.json tests/inputs/*.json; do
  [[ $f == *.schema.json ]] || examples+=("$root/$f")
done
corpus=()
for f in tests/corpus/*; do
  [[ $f == */cases.tsv ]] || corpus+=("$root/$f")
done
ckpt=$root/tests/inputs/checkpoints

# One command per line, its arguments separated by tabs; FT stands for the binary.
commands() {
  local f
  for f in "${examples[@]}" "${corpus[@]}"; do
    printf 'run\t%s\t--color\tnever\n' "$f"
    printf 'run\t%s\t--format\tmarkdown\n' "$f"
    printf 'run\t%s\t--format\tjson\n' "$f"
    printf 'run\t%s\t--format\thtml\n' "$f"
    printf 'run\t%s\t--detail\tarithmetic\t--color\tnever\n' "$f"
    printf 'grad\t%s\t--color\tnever\n' "$f"
    printf 'grad\t%s\t--format\tjson\n' "$f"
    printf 'grad\t%s\t--format\thtml\n' "$f"
    printf 'worksheet\t%s\n' "$f"
    printf 'worksheet\t%s\t--format\thtml\n' "$f"
    printf 'quiz\t%s\t--format\tjson\n' "$f"
    printf 'check\t%s\n' "$f"
  done
  # Real models' layers, read from the tiny checkpoints of every family.
  local format
  for format in text json html; do
    printf 'run\t--checkpoint\t%s\t--layer\t1\t--word\t Paris\t--color\tnever\t--format\t%s\n' "$ckpt/gpt2" "$format"
    printf 'run\t--checkpoint\t%s\t--layer\t0\t--input\t%s\t--color\tnever\t--format\t%s\n' "$ckpt/llama" "$ckpt/x.npy" "$format"
    printf 'run\t--checkpoint\t%s\t--layer\t0\t--embedding\t1,2\t--color\tnever\t--format\t%s\n' "$ckpt/mixtral" "$format"
    printf 'run\t--checkpoint\t%s\t--layer\t1\t--embedding\t5\t--color\tnever\t--format\t%s\n' "$ckpt/bert" "$format"
    printf 'run\t--checkpoint\t%s\t--layer\t0\t--embedding\t7\t--color\tnever\t--format\t%s\n' "$ckpt/llama/model.safetensors" "$format"
    printf 'run\t--checkpoint\t%s\t--layer\t0\t--embedding\t0\t--color\tnever\t--format\t%s\n' "$ckpt/truncated" "$format"
  done
  local npy
  for npy in "$root"/tests/inputs/numpy/*.np?; do
    printf 'run\t--checkpoint\t%s\t--layer\t0\t--input\t%s\t--color\tnever\n' "$ckpt/gpt2" "$npy"
  done
  printf 'gelu-table\n'
  printf 'gelu-table\t--from\t-3\t--to\t3\t--step\t0.5\t--exact\t--derivative\t--silu\t--phi\t--format\t%s\n' csv json markdown html text
  printf 'gelu-table\t--plot\t--exact\t--derivative\t--silu\t--phi\n'
  printf 'params\t--model\t%s\n' gpt2 bert-base llama2-7b mixtral-8x7b
  printf 'params\t--model\tmixtral-8x7b\t--format\t%s\n' markdown json html
  printf 'params\t--d-model\t128\t--d-ff\t512\n'
  printf 'new\n'
  printf 'new\t--gated\t--activation\tgelu\t--layout\tout_in\t--residual\t--tokens\t1\n'
  printf 'new\t--moe\t3\t--top-k\t1\t--seed\t9\n'
  printf 'new\t--moe\t2\t--gated\t--zeros\n'
  printf 'schema\n'
  # The shipped models through every analysis: a prompt's run, tracing, units, an edit, gradients.
  local m=$root/data/models
  head -n 5 "$m/atlas/facts.tsv" >"$out/facts5.tsv"
  printf 'The capital of France is\tFrance\t Rome\nThe capital of Spain is\tSpain\t Paris\n' >"$out/new-facts.tsv"
  for format in text json; do
    printf 'run\t--checkpoint\t%s\t--prompt\tThe capital of France is\t--color\tnever\t--format\t%s\n' "$m/capitals" "$format"
    printf 'run\t--checkpoint\t%s\t--prompt\tThe capital of France is\t--layer\tall\t--color\tnever\t--format\t%s\n' "$m/atlas" "$format"
    printf 'run\t--checkpoint\t%s\t--prompt\tThe capital of France is\t--layer\t1\t--ablate\t1:168,2:44\t--color\tnever\t--format\t%s\n' "$m/atlas" "$format"
    printf 'locate\t--checkpoint\t%s\t--prompt\tThe capital of France is\t--subject\tFrance\t--samples\t2\t--color\tnever\t--format\t%s\n' "$m/nations" "$format"
    printf 'locate\t--checkpoint\t%s\t--facts\t%s\t--samples\t2\t--color\tnever\t--format\t%s\n' "$m/atlas" "$out/facts5.tsv" "$format"
    printf 'locate\t--checkpoint\t%s\t--prompt\tThe capital of France is\t--subject\tFrance\t--atp\t--layer\t1\t--color\tnever\t--format\t%s\n' "$m/atlas" "$format"
    printf 'units\t--checkpoint\t%s\t--layer\t1\t--unit\t168\t--format\t%s\n' "$m/atlas" "$format"
    printf 'units\t--checkpoint\t%s\t--layer\t1\t--promotes\t Paris\t--format\t%s\n' "$m/atlas" "$format"
    printf 'edit\t--checkpoint\t%s\t--layer\t1\t--at\tlast\t--prompt\tThe capital of France is\t--subject\tFrance\t--target\t Rome\t--color\tnever\t--format\t%s\n' "$m/atlas" "$format"
    printf 'edit\t--checkpoint\t%s\t--facts\t%s\t--layers\t0-1\t--color\tnever\t--format\t%s\n' "$m/atlas" "$out/new-facts.tsv" "$format"
    printf 'grad\t--checkpoint\t%s\t--prompt\tThe capital of France is\t--target\t Paris\t--layer\t1\t--color\tnever\t--format\t%s\n' "$m/atlas" "$format"
    printf 'run\t--checkpoint\t%s\t--prompt\tThe capital of France is\t--layer\t2\t--transcoder\t%s\t--color\tnever\t--format\t%s\n' "$m/nations" "$m/nations/transcoder-layer2" "$format"
  done
  printf 'generate\t%s\n' man bash zsh fish
}

# The version line names each build's commit; nothing else may differ.
run_one() {
  local bin=$1 dest=$2
  shift 2
  local status=0
  (cd "$out" && "$bin" "$@" </dev/null >"$dest.out" 2>"$dest.err") || status=$?
  echo "$status" >"$dest.status"
  sed -i -E 's/\(commit [0-9a-f]+(-dirty)?\)/(commit)/' "$dest.out"
}

n=0
failed=0
while IFS=$'\t' read -r -a args; do
  n=$((n + 1))
  run_one "$old" "$out/old" "${args[@]}"
  run_one "$new" "$out/new" "${args[@]}"
  for part in out err status; do
    if ! cmp -s "$out/old.$part" "$out/new.$part"; then
      failed=$((failed + 1))
      echo "differs ($part): ffn-trace ${args[*]}" >&2
      diff "$out/old.$part" "$out/new.$part" | head -5 >&2 || true
    fi
  done
done < <(commands)

if ((failed > 0)); then
  echo "compare-builds: $failed of $((3 * n)) outputs differ from $1" >&2
  exit 1
fi
echo "compare-builds: $n commands, stdout, stderr and exit status identical to $1 ($base)"
