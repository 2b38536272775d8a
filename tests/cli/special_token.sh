#!/usr/bin/env bash
# A special token is shown the same way in every view: its spelling and the mark "(special)",
# never in quotes as if it were text. The shipped model's tokenizer has one, <|endoftext|>
# (id 728), which it predicts after "The capital of France is Paris.".
#
#   special_token.sh VIEW FFN_TRACE MODEL_DIR
set -u
view=$1 ft=$2 model=$3
after="The capital of France is Paris."
case "$view" in
    tokenize) out=$("$ft" tokenize --checkpoint "$model" "<|endoftext|>The capital") ;;
    run) out=$("$ft" run --checkpoint "$model" --layer 0 --prompt "$after" --detail summary --color never --width 80) ;;
    layer) out=$("$ft" run --checkpoint "$model" --layer 1 --word " Paris" --color never) ;;
    layers) out=$("$ft" run --checkpoint "$model" --layer all --prompt "$after" --color never --width 80) ;;
    page) out=$("$ft" run --checkpoint "$model" --layer 0 --prompt "$after" --detail summary --format html) ;;
    units) out=$("$ft" units --checkpoint "$model" --layer 0 --unit 86 --top 3) ;;
    contexts) corpus=$(mktemp) && trap 'rm -f "$corpus"' EXIT
              printf 'The capital of France is<|endoftext|> Paris\nThe capital of Japan is Tokyo\n' >"$corpus"
              out=$("$ft" units --checkpoint "$model" --layer 0 --unit 24 --top 3 --corpus "$corpus") ;;
    promotes) out=$("$ft" units --checkpoint "$model" --layer 0 --promotes "<|endoftext|>" --top 2) ;;
    locate) out=$("$ft" locate --checkpoint "$model" --prompt "<|endoftext|>The capital of France is" --subject France \
                  --target "<|endoftext|>" --samples 2 --color never) ;;
    edit) copy=$(mktemp -d) && trap 'rm -rf "$copy"' EXIT
          out=$("$ft" edit --checkpoint "$model" --layer 0 --prompt "The capital of France is" --subject France \
                --target "<|endoftext|>" --at last --save "$copy/edited" --color never) ;;
    quiz) out=$("$ft" quiz --checkpoint "$model" --layer 0 --prompt "$after" --color never </dev/null) ;;
    worksheet) out=$("$ft" worksheet --checkpoint "$model" --layer 0 --prompt "$after") ;;
    *) echo "unknown view $view"; exit 1 ;;
esac
status=$?
[ $status -eq 0 ] || { echo "$view: exit $status"; exit 1; }
# The page escapes < as &lt;; the mark is the same.
marked=$(grep -cE '(<|&lt;)\|endoftext\|(>|&gt;) \(special\)' <<<"$out")
quoted=$(grep -cE '("|&quot;)(<|&lt;)\|endoftext\|(>|&gt;)("|&quot;)' <<<"$out")
echo "$view: $marked lines with the mark, $quoted with the token in quotes"
[ "$marked" -gt 0 ] && [ "$quoted" -eq 0 ]
