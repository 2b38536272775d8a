#!/usr/bin/env bash
# The page view in a real browser: every subcommand's page for every data/ example is opened in
# headless Chromium with the #selftest hash. The page clicks a cell, moves with the arrow keys,
# types a right and a wrong guess in predict-first, reads a plot, and records what it saw (and
# any script error) in the DOM, which --dump-dom hands back here. A few pages are also drawn to
# PNG and checked for size and for not being blank. Exit 77 (skipped) without Chromium.
# Usage: pages.sh FFN_TRACE DATA_DIR WORK_DIR
set -uo pipefail
ft=$1 data=$2 work=$3
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "skipped: no chromium (scripts/install-deps.sh installs it)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
# Each browser run gets a profile of its own under the work folder, never the user's.
chrome() {
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions \
    --user-data-dir="$work/profile" --hide-scrollbars "$@" 2>/dev/null
}
# A dump is searched as a here-string, never through a pipe: grep -q stops reading at its first
# match, printf then fails writing to the closed pipe, and pipefail counts a found text as missing.
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

make_page() {  # name, then the ffn-trace arguments
  local name=$1
  shift
  if ! "$ft" "$@" --format html -o "$work/$name.html" 2>"$work/$name.err"; then
    fail "$name: ffn-trace $* failed: $(head -c 300 "$work/$name.err")"
    return 1
  fi
}

pages=()
for file in "$data"/*.json; do
  case $file in *.schema.json) continue ;; esac
  name=$(basename "$file" .json)
  make_page "run_$name" run "$file" && pages+=("run_$name")
  make_page "grad_$name" grad "$file" && pages+=("grad_$name")
  make_page "worksheet_$name" worksheet "$file" && pages+=("worksheet_$name")
done
# A layer too big for arithmetic (tables summarised, heatmaps) and an MoE one, made by `new`.
"$ft" new --d-model 64 --d-ff 256 --tokens 40 --activation gelu --residual --seed 3 >"$work/big.json"
"$ft" new --d-model 16 --d-ff 48 --moe 8 --top-k 2 --tokens 12 --gated --seed 4 >"$work/big_moe.json"
for name in big big_moe; do
  make_page "run_$name" run "$work/$name.json" && pages+=("run_$name")
done
# Checkpoints: the tests' tiny GPT-2 and Mixtral layers.
checkpoints=$here/../inputs/checkpoints
make_page run_checkpoint_gpt2 run --checkpoint "$checkpoints/gpt2" --layer 1 --word " Paris" && pages+=(run_checkpoint_gpt2)
make_page run_checkpoint_mixtral run --checkpoint "$checkpoints/mixtral" --layer 0 --input "$checkpoints/x.npy" &&
  pages+=(run_checkpoint_mixtral)
# A checkpoint under a long path, as the Hugging Face cache keeps them: the title and the fields
# break it rather than widen the page (the self-test checks the page's width).
snapshot=$work/hub/models--meta-llama--Llama-2-7b-hf/snapshots/8cca527612d856d7d32bd94f8103728d614eb852
mkdir -p "$(dirname "$snapshot")" && ln -sfn "$checkpoints/mixtral" "$snapshot"
make_page run_checkpoint_long_path run --checkpoint "$snapshot" --layer 0 --embedding 0,1 && pages+=(run_checkpoint_long_path)
# A GGUF layer of quantized weights (tests/inputs/gguf/quantized_units.py) with a unit explained: its
# weights' blocks and dequantization; and a Mixtral's with a unit of expert 1.
python3 "$here/../inputs/gguf/quantized_units.py" write dense "$work/quantized.gguf"
python3 "$here/../inputs/gguf/quantized_units.py" write moe "$work/quantized_moe.gguf"
make_page run_gguf_quantized run --checkpoint "$work/quantized.gguf" --layer 0 --embedding 2,3 --unit 300 &&
  pages+=(run_gguf_quantized)
make_page run_gguf_quantized_moe run --checkpoint "$work/quantized_moe.gguf" --layer 0 --embedding 2,3,4 --unit 1:7 &&
  pages+=(run_gguf_quantized_moe)
# A prompt through the shipped model, with a knock-out.
make_page run_prompt_capitals run --checkpoint "$data/models/capitals" --layer 0 --prompt "The capital of France is" \
  --ablate 172,84,28,168,203 && pages+=(run_prompt_capitals)
# A transcoder read beside the prompt's layer (a folder written by hand, tests/inputs/transcoder).
transcoder_args=(run --checkpoint "$data/models/atlas" --layer 1 --prompt "The capital of France is"
  --transcoder "$here/../inputs/transcoder/atlas_layer1" --detail summary)
make_page run_prompt_transcoder "${transcoder_args[@]}" && pages+=(run_prompt_transcoder)
# The knock-out sweep: its table and its curve, whose readout the self-test moves.
make_page run_prompt_sweep run --checkpoint "$data/models/capitals" --layer 0 --prompt "The capital of France is" \
  --ablate-top 5 && pages+=(run_prompt_sweep)
# Interventions at a position, and every layer of the deeper model with its lens grid.
make_page run_prompt_intervene run --checkpoint "$data/models/capitals" --layer 0 --prompt "The capital of France is" \
  --intervene 172@4*0.5 --intervene 84=mean && pages+=(run_prompt_intervene)
make_page run_prompt_layers run --checkpoint "$data/models/atlas" --layer all --prompt "The capital of France is" &&
  pages+=(run_prompt_layers)
# A layer's units over a small corpus: the table, and every unit's card with its contexts and histogram.
make_page units_capitals units --checkpoint "$data/models/capitals" --layer 0 --corpus "$here/../inputs/units/small.txt" &&
  pages+=(units_capitals)
make_page units_two units --checkpoint "$data/models/capitals" --layer 0 --corpus "$here/../inputs/units/small.txt" \
  --unit 172,24 && pages+=(units_two)
# Causal tracing: three grids coloured by P, each cell's P and effect on a click or hover.
make_page locate_capitals locate --checkpoint "$data/models/capitals" --prompt "The capital of France is" --subject France &&
  pages+=(locate_capitals)
# The edit: its loss curve, the key and value as bars, the tables before → after. The new
# checkpoint goes to --save's folder, the page to stdout.
if "$ft" edit --checkpoint "$data/models/capitals" --layer 0 --prompt "The capital of France is" --subject France \
  --target " Rome" --at last --save "$work/edit_checkpoint" --format html >"$work/edit_capitals.html" 2>"$work/edit.err"; then
  pages+=(edit_capitals)
else
  fail "edit_capitals: ffn-trace edit failed: $(head -c 300 "$work/edit.err")"
fi
make_page gelu gelu-table && pages+=(gelu)
make_page sweep_abs sweep "$data/abs_relu.json" --from -3 --to 3 && pages+=(sweep_abs)
make_page gelu_all gelu-table --from -4 --to 4 --step 0.5 --exact --derivative --silu && pages+=(gelu_all)
make_page params_gpt2 params --model gpt2 && pages+=(params_gpt2)
make_page params_mixtral params --model mixtral-8x7b && pages+=(params_mixtral)
make_page run_walkthrough_hidden run "$data/walkthrough.json" --hide && pages+=(run_walkthrough_hidden)
# Predict-first with every block of worked numbers: the self-test finds none of them in the visible text.
make_page run_hand_hidden run "$data/lesson_hand.json" --hide --detail arithmetic --bars && pages+=(run_hand_hidden)
make_page run_walkthrough_ascii run "$data/walkthrough.json" --ascii && pages+=(run_walkthrough_ascii)
if LC_ALL=C grep -q '[^[:print:][:space:]]' "$work/run_walkthrough_ascii.html"; then
  fail "run --format html --ascii: a byte above ASCII"
fi

for page in "${pages[@]}"; do
  # 600 px wide, a narrow laptop window or a tablet: the self-test checks that nothing widens the page.
  dom=$(chrome --window-size=600,800 --virtual-time-budget=5000 --dump-dom "file://$work/$page.html#selftest")
  result=$(printf '%s' "$dom" | grep -o '<pre id="selftest"[^>]*>[^<]*' | head -1)
  errors=$(printf '%s' "$dom" | grep -o '<pre id="errors">[^<]*' | sed 's/<pre id="errors">//')
  case $result in
    *'data-result="pass"'*) ;;
    *) fail "$page: self-test did not pass: ${result:-no self-test output (did the script run?)}" ;;
  esac
  [ -z "$errors" ] || fail "$page: script error: $errors"
  # No markup from a user string: the page's only executable script is its own.
  scripts=$(printf '%s' "$dom" | grep -o '<script>' | wc -l)
  [ "$scripts" -eq 1 ] || fail "$page: $scripts executable scripts in the DOM, expected 1"
done

# The locate page's cells say their P and effect when clicked (the self-test clicks the first).
dom=$(chrome --window-size=600,800 --virtual-time-budget=5000 --dump-dom "file://$work/locate_capitals.html#selftest")
grep -q '<div id="how"[^>]*><strong>P(" Paris") with the stream leaving layer [01] restored at "The"</strong><pre>value = 0' <<<"$dom" ||
  fail "locate_capitals: clicking a cell does not show its P"
grep -q 'effect = value − corrupted' <<<"$dom" || fail "locate_capitals: a cell does not show its effect"
grep -q 'normalised = ' <<<"$dom" || fail "locate_capitals: a cell does not show its normalised effect"
# The edit's page: a loss cell says how its terms add up; the loss curve and the bars are drawn.
dom=$(chrome --window-size=600,800 --virtual-time-budget=5000 --dump-dom "file://$work/edit_capitals.html#selftest")
grep -q '<div id="how"[^>]*><strong>the loss at step 0</strong><pre>L = mean −log p(" Rome")' <<<"$dom" ||
  fail "edit_capitals: clicking a loss cell does not show its terms"
[ "$(printf '%s' "$dom" | grep -o '<figure class="plot">' | wc -l)" -eq 1 ] || fail "edit_capitals: no loss curve"
[ "$(printf '%s' "$dom" | grep -o '<figure class="chart">' | wc -l)" -eq 3 ] || fail "edit_capitals: not three bar charts (k*, u, the value)"
# The quantized pages show each explained weight's block and its formula with the numbers, in
# the open page (not in a folded block: no closed <details> holds them).
for page in run_gguf_quantized run_gguf_quantized_moe; do
  chrome --window-size=600,800 --virtual-time-budget=5000 --dump-dom "file://$work/$page.html" >"$work/$page.dom"
  python3 - "$page" "$work/$page.dom" <<'PY' || fail "$page: the dequantized weights are not shown open"
import re, sys
dom = open(sys.argv[2], encoding="utf-8").read()
def shown(pattern):
    m = re.search(pattern, dom)
    if not m:
        sys.exit(f"{sys.argv[1]}: no {pattern!r} in the page")
    before = dom[:m.start()]
    opened = [t for t in re.findall(r"<details[^>]*>|</details>", before)]
    depth = []
    for t in opened:
        if t.startswith("</"):
            depth.pop()
        else:
            depth.append(" open" in t)
    if not all(depth):
        sys.exit(f"{sys.argv[1]}: {pattern!r} sits in a folded block")
shown(r"in block \d+ of its row \(columns \d+–\d+\), block [\d,]+ of the tensor: 144 bytes")
shown(r"w = d · sc · q − dmin · m = [0-9.e-]+ · \d+ · \d+ − [0-9.e-]+ · \d+\s+= -?[0-9.e-]+")
if sys.argv[1].endswith("_moe") and dom.count("Expert 1&#39;s unit 7 · ") + dom.count("Expert 1's unit 7 · ") > 3:
    sys.exit(f"{sys.argv[1]}: expert 1's unit 7 explained more often than at its tokens")
shown(r"w = d · sc · \(q − 32\) = " if sys.argv[1] == "run_gguf_quantized" else r"w = d · q = [0-9.]+ · \(?−?\d+\)? = ")
PY
done
# The prompt's page: clicking a unit's knock-out cell shows the prediction without that unit,
# computed when the page was written (#cell= opens the page on that cell, as a click does).
dom=$(chrome --window-size=600,800 --virtual-time-budget=5000 --dump-dom \
  "file://$work/run_prompt_capitals.html#cell=the%20prediction%20without%20unit%20172")
grep -q '<div id="how"[^>]*><strong>the prediction without unit 172</strong><pre>unit 172 of layer 0 set to 0' <<<"$dom" ||
  fail "run_prompt_capitals: clicking a unit's knock-out does not show the prediction without it"
grep -q 'P(" Paris") = 0.8862 → 0.7893' <<<"$dom" ||
  fail "run_prompt_capitals: the knock-out of unit 172 does not give P(\" Paris\") 0.8862 → 0.7893 (run --ablate 172)"
# The units that wrote most toward " Paris" (172, 84, 28: the units' table) are among the
# columns of the layer's steps, each cell explained on a click; the lens and knock-out are grids.
for cell in 'hidden[4][172]' 'activated[4][84]' 'activated[4][28]'; do
  grep -qF "data-name=\"$cell\"" "$work/run_prompt_capitals.html" || fail "run_prompt_capitals: no explained cell $cell"
done
grep -q '<th scope="col">the stream</th>' "$work/run_prompt_capitals.html" || fail "run_prompt_capitals: the lens is not a grid"
grep -q '<th scope="col">knocked out</th>' "$work/run_prompt_capitals.html" || fail "run_prompt_capitals: the knock-out is not a grid"
# The transcoder's section in the page as the browser shows it: at every token the active
# features' id, pre-activation, z and push, the JSON's numbers to the four decimals shown, and the
# FFN's push explained both ways.
chrome --window-size=1000,1400 --virtual-time-budget=5000 --dump-dom "file://$work/run_prompt_transcoder.html" \
  >"$work/run_prompt_transcoder.dom"
"$ft" "${transcoder_args[@]}" --format json -o "$work/run_prompt_transcoder.json" ||
  fail "run_prompt_transcoder: the JSON view failed"
python3 - "$work/run_prompt_transcoder.dom" "$work/run_prompt_transcoder.json" <<'PY' || fail "run_prompt_transcoder: the page's features are not the JSON's"
import html, json, re, sys
dom = html.unescape(open(sys.argv[1], encoding="utf-8").read()).replace("\u2212", "-")
t = json.load(open(sys.argv[2], encoding="utf-8"))["transcoder"]
at = dom.find("The transcoder beside the units: 16 features")
if at < 0:
    sys.exit("no transcoder section in the page")
sections = re.split(r"Token (\d+) \(", dom[at:])[1:]
if [int(n) for n in sections[0::2]] != list(range(len(t["tokens"]))):
    sys.exit(f"the page's tokens {sections[0::2]}, the JSON has {len(t['tokens'])}")
cell = r"<t[hd][^>]*>([^<]*)</t[hd]>"
for i, (token, body) in enumerate(zip(t["tokens"], sections[1::2])):
    rows = [r for r in re.findall(r"<tr>" + cell * 4 + r"</tr>", body) if r[0] != "feature"]
    want = [(str(f["id"]), f"{f['pre']:.4f}", f"{f['activation']:.4f}", f"{f['push']:.4f}") for f in token["features"]]
    if rows != want:
        sys.exit(f"token {i}: the page shows {rows}, the JSON {want}")
last = t["tokens"][-1]
for text in (f"y · g / σ = {last['ffn_push']:.4f}", f"Σ_f push_f = {last['features_push']:.4f}",
             f"e · g / σ = {last['error_push']:.4f}"):
    if text not in dom:
        sys.exit(f"the page lacks {text!r}")
print(f"run_prompt_transcoder: {sum(len(k['features']) for k in t['tokens'])} features at {len(t['tokens'])} tokens as the JSON's")
PY
# ... and reads at 360 px, a phone held upright: nothing widens the page (the self-test measures it).
dom=$(chrome --window-size=360,740 --virtual-time-budget=5000 --dump-dom "file://$work/run_prompt_capitals.html#selftest")
grep -q '<pre id="selftest" data-result="pass"' <<<"$dom" ||
  fail "run_prompt_capitals at 360 px: $(printf '%s' "$dom" | grep -o '<pre id="selftest"[^<]*')"
chrome --window-size=360,740 --screenshot="$work/run_prompt_capitals_360.png" "file://$work/run_prompt_capitals.html" >/dev/null
python3 "$here/png_check.py" "$work/run_prompt_capitals_360.png" 360 740 || fail "run_prompt_capitals: screenshot at 360 px"
for page in run_walkthrough gelu params_mixtral run_prompt_capitals run_prompt_transcoder units_capitals locate_capitals edit_capitals; do
  chrome --window-size=1000,1400 --screenshot="$work/$page.png" "file://$work/$page.html" >/dev/null
  python3 "$here/png_check.py" "$work/$page.png" 1000 1400 || fail "$page: screenshot"
done

# Printing: the print stylesheet gives a PDF of the whole walkthrough.
chrome --no-pdf-header-footer --print-to-pdf="$work/print.pdf" "file://$work/run_walkthrough.html" >/dev/null
if [ "$(head -c 4 "$work/print.pdf" 2>/dev/null)" != "%PDF" ] || [ "$(wc -c <"$work/print.pdf")" -lt 20000 ]; then
  fail "printing the walkthrough's page gave no PDF"
fi

# A predict-first page printed is a worksheet: the asked numbers of data/walkthrough.json
# (hidden[0][0] = 0.43 by hand from its weights, activated[0][0] = gelu(0.43) = 0.2865,
# output[0][0] = 0.4215) print as empty boxes, and print only after "Reveal all" (#reveal).
if command -v pdftotext >/dev/null; then
  asked='0\.2865|0\.4300|0\.4215'
  chrome --no-pdf-header-footer --virtual-time-budget=3000 --print-to-pdf="$work/hidden.pdf" \
    "file://$work/run_walkthrough_hidden.html" >/dev/null
  chrome --no-pdf-header-footer --virtual-time-budget=3000 --print-to-pdf="$work/revealed.pdf" \
    "file://$work/run_walkthrough_hidden.html#reveal" >/dev/null
  hidden_text=$(pdftotext -layout "$work/hidden.pdf" - 2>&1)
  revealed_text=$(pdftotext -layout "$work/revealed.pdf" - 2>&1)
  grep -q '1\.0000 *0\.5000 *-0\.3000 *0\.8000' <<<"$hidden_text" ||
    fail "the --hide page printed lacks its input row: $(printf '%s' "$hidden_text" | head -c 300)"
  leaked=$(printf '%s' "$hidden_text" | grep -Eo "$asked" | sort -u | tr '\n' ' ')
  [ -z "$leaked" ] || fail "the --hide page printed shows asked numbers: $leaked"
  for n in 0.2865 0.4300 0.4215; do
    grep -q "$n" <<<"$revealed_text" || fail "the --hide page printed after Reveal all lacks $n"
  done
else
  echo "note: no pdftotext (poppler-utils): the printed predict-first page is not read"
fi

echo "${#pages[@]} pages opened, $failures failures"
[ "$failures" -eq 0 ]
