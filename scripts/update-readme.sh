#!/usr/bin/env bash
# Rewrites the outputs of the commands README.md and the Markdown files under docs/ show
# (```text blocks starting "$ ffn-trace") with what build/ffn-trace prints now, keeping each "..."
# and the lines around it. Read `git diff README.md docs/` before committing: the documentation
# tests compare the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build --preset default
mapfile -t docs < <(grep -rl --include='*.md' '^\$ ffn-trace' README.md docs)
python3 tests/readme/readme_test.py "${docs[@]}" "$PWD/build" "$PWD/data" --update
