#!/usr/bin/env bash
# Redraws docs/page.png, the page view README.md and docs/guide.md show, with the command the guide gives beside it:
# the lesson's hand example opened on hidden[2] in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
ft=${1:-build/ffn-trace}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$ft" run data/lesson_hand.json --format html -o "$work/lesson.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size=900,2100 --screenshot="$work/page.png" "file://$work/lesson.html#cell=hidden[2]" 2>/dev/null
python3 tests/browser/png_check.py "$work/page.png" 900 2100
cp "$work/page.png" docs/page.png
