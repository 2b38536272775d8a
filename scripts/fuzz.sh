#!/usr/bin/env bash
# Runs the libFuzzer target for the given seconds, seeded with data/ and the hostile corpus.
# New inputs go to a scratch folder, not into the repository; a crash is written to
# build-fuzz/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp data/*.json tests/corpus/*.json tests/inputs/*.json "$work/corpus/"
./build-fuzz/ffn_trace_fuzz "$work/corpus" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix=build-fuzz/ -print_final_stats=1 2>&1 | tail -n 25
