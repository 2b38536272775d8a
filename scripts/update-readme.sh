#!/usr/bin/env bash
# Rewrites the outputs of the commands README.md shows (```text blocks starting "$ ffn-trace")
# with what build/ffn-trace prints now, keeping each "..." and the lines around it. Read
# `git diff README.md` before committing: the README test compares the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build --preset default
python3 tests/readme/readme_test.py README.md "$PWD/build" "$PWD/data" --update
