#!/usr/bin/env bash
# `ffn-trace serve` on the loopback (scripts/bench_serve.py): the 95th percentile of a typed
# prompt's answer, a knock-out and a 10-sample trace on the shipped models, one client at a time.
# A benchmark for people, not a test; `make bench` runs it.
#
#   scripts/bench_serve.sh     PYTHON=/usr/bin/python3 FFN_TRACE=build/ffn-trace
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-/usr/bin/python3}
exec "$python" scripts/bench_serve.py "${FFN_TRACE:-build/ffn-trace}" data/models/capitals data/models/atlas
