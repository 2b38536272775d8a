#!/usr/bin/env bash
# Rewrites the golden files of tests/golden from the current build. Read every changed line
# (git diff tests/golden) against the documents before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build --preset default
FFN_TRACE_UPDATE_GOLDEN=1 ctest --preset default -R '^golden:' --output-on-failure
git status --short tests/golden
