#!/usr/bin/env bash
# --prompts FILE against separate --prompt runs: the JSON list must be each line's single-prompt
# object, byte for byte, in the file's order; the blank lines skipped, each one warned of on
# stderr. Prints "same" when it is.
#
#   prompts_same.sh FFN_TRACE MODEL_DIR run|locate
set -euo pipefail
ft=$1 model=$2 which=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$which" = run ]; then
    # A CR LF line, blank lines of nothing and of spaces, and a tab kept inside a prompt.
    printf 'The capital of France is\n\n   \nThe capital of Japan is\r\nParis is\tthe capital of\n' >"$work/prompts.txt"
    prompts=("The capital of France is" "The capital of Japan is" $'Paris is\tthe capital of')
    each=(run --checkpoint "$model" --layer 1 --ablate 3 --format json)
    "$ft" "${each[@]}" --prompts "$work/prompts.txt" >"$work/list.json" 2>"$work/stderr"
    for i in 0 1 2; do "$ft" "${each[@]}" --prompt "${prompts[$i]}" >"$work/$i.json"; done
else
    # Line 2 takes --subject; the others name their own after a tab.
    printf 'The capital of France is\tFrance\nThe capital of Japan is\n\nParis is the capital of\tParis\n' >"$work/prompts.txt"
    prompts=("The capital of France is" "The capital of Japan is" "Paris is the capital of")
    subjects=(France Japan Paris)
    each=(locate --checkpoint "$model" --samples 2 --format json)
    "$ft" "${each[@]}" --subject Japan --prompts "$work/prompts.txt" >"$work/list.json" 2>"$work/stderr"
    for i in 0 1 2; do "$ft" "${each[@]}" --prompt "${prompts[$i]}" --subject "${subjects[$i]}" >"$work/$i.json"; done
fi
{
    printf '[\n'
    for i in 0 1 2; do
        [ "$i" = 0 ] || printf ',\n'
        head -c -1 "$work/$i.json"  # its last line break
    done
    printf '\n]\n'
} >"$work/expected.json"
if ! cmp "$work/list.json" "$work/expected.json"; then
    diff "$work/list.json" "$work/expected.json" | head -20
    exit 1
fi
# Parsed too: three objects, and the text of each prompt where it belongs.
python3 -c 'import json, sys
runs = json.load(open(sys.argv[1]))
assert [r["prompt"]["text"] for r in runs] == sys.argv[2:], [r["prompt"]["text"] for r in runs]' \
    "$work/list.json" "${prompts[@]}"
# The text report's summary says what each prompt's own JSON says: for run, its next token's
# probability (with the knock-out, after it too) and its three top units by attribution; for
# locate, its clean and corrupted P and each kind's strongest cell that is not the clean run itself.
text=("${each[@]/json/text}" --prompts "$work/prompts.txt" --color never --width 120)
if [ "$which" = run ]; then "$ft" "${text[@]}" --detail summary; else "$ft" "${text[@]}" --subject Japan; fi \
    >"$work/report.txt" 2>/dev/null
python3 - "$which" "$work" <<'PY'
import json, re, sys
which, work = sys.argv[1], sys.argv[2]
lines = open(f"{work}/report.txt", encoding="utf-8").read().split("\n")
runs = [json.load(open(f"{work}/{i}.json")) for i in range(3)]
rows = [l.split() for l in lines if re.match(r"^ +[0-9]+ +\"", l)][:3]
assert [r[0] for r in rows] == (["1", "4", "5"] if which == "run" else ["1", "2", "4"]), rows
for row, one in zip(rows, runs):
    if which == "run":
        a = one["attribution"]
        top = [c for c in one["changes"] if c["id"] == a["target"]["id"]][0]
        units = ", ".join(str(u["unit"]) for u in a["units"][:3])
        want = [f"{one['baseline_prediction']['top'][0]['prob']:.4f}", f"{top['after']:.4f}"]
        assert row[-5:-3] == want and " ".join(row[-3:]) == units, (row, want, units)
    else:
        want = [f"{one['clean_prob']:.4f}", f"{one['corrupted_prob']:.4f}"]
        assert row[-2:] == want, (row, want)
cells = [l.split() for l in lines if re.match(r"^ +([0-9]+ +)?(state|mlp|attn) ", l)]
if which == "locate":
    assert len(cells) == 9, cells
    for k, one in enumerate(runs):
        for j, kind in enumerate(["state", "mlp", "attn"]):
            effect = one["grids"][kind]["effect"]
            # never the clean run's own last stream (the state leaving the last block at the last token)
            L, T = len(effect), len(effect[0])
            best = max(effect[l][t] for l in range(L) for t in range(T) if not (kind == "state" and (l, t) == (L - 1, T - 1)))
            assert cells[3 * k + j][-1] == f"{best:+.4f}", (cells[3 * k + j], best)
PY
blank=$([ "$which" = run ] && echo "2 3" || echo "3")
for line in $blank; do
    grep -q "^warning: $work/prompts.txt: line $line is blank, skipped$" "$work/stderr" || { cat "$work/stderr"; exit 1; }
done
[ "$(wc -l <"$work/stderr")" = "$(echo $blank | wc -w)" ] || { cat "$work/stderr"; exit 1; }
echo same
