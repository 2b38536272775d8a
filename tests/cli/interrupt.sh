#!/usr/bin/env bash
# Long work on a terminal shows its progress, and Ctrl-C stops it cleanly: `units` over a long
# corpus (the shipped one, twenty times) with -o, in tmux (a real terminal, Ctrl-C typed as a key),
# until its progress line shows, then Ctrl-C: exit 130, one line, no -o file, nothing beside it.
# The same run with stderr a file draws no progress; Ctrl-C while it still reads its input (not
# yet watched) ends it at once, as cleanly; and a corpus long enough to take seconds to tokenize
# shows that progress, Ctrl-C stopping it as cleanly.
#
#   interrupt.sh FFN_TRACE MODEL_DIR
#
# Exit 77 (skipped) when tmux is not installed.
set -u
ft=$1 model=$2
command -v tmux >/dev/null || { echo "tmux is not installed: skipped"; exit 77; }
dir=$(mktemp -d)
sock=$dir/tmux.sock
t() { tmux -S "$sock" "$@"; }
trap 'for s in "$dir"/*.sock; do tmux -S "$s" kill-server 2>/dev/null; done; rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
for _ in $(seq 20); do cat "$model/corpus.txt"; done >"$dir/corpus.txt"
mkdir "$dir/out"

# 1. On a terminal: the progress line, then Ctrl-C.
t new-session -d -x 200 -y 20 "'$ft' units --checkpoint '$model' --layer 0 --corpus '$dir/corpus.txt' --format json -o '$dir/out/units.json'; echo \"[exit \$?]\"; sleep 60"
screen() { t capture-pane -p -J; }
wait_for() {  # TEXT: waits up to 20 seconds for the screen to show it
    for _ in $(seq 200); do
        screen | grep -qF -- "$1" && return 0
        sleep 0.1
    done
    screen
    fail "the screen never showed: $1"
}
wait_for "reading the corpus through the model: "
screen | grep -qE "reading the corpus through the model: [0-9,]+ of 9,000 \([0-9]+%\)" || { screen; fail "the progress line counts the texts"; }
t send-keys C-c
wait_for "[exit 130]"
[ "$(screen | grep -c '^error: interrupted (Ctrl-C); nothing was written$')" = 1 ] || { screen; fail "one line says it was interrupted"; }
screen | grep -q "reading the corpus" && { screen; fail "the progress line is cleared"; }
[ -z "$(ls -A "$dir/out")" ] || fail "the -o folder holds $(ls -A "$dir/out")"

# 2. Stderr a file: no progress drawn, the output whole.
"$ft" units --checkpoint "$model" --layer 0 --format json -o "$dir/out/small.json" 2>"$dir/err" || fail "units failed: $(cat "$dir/err")"
[ ! -s "$dir/err" ] || fail "stderr, a file, got: $(od -c "$dir/err" | head -5)"
[ -s "$dir/out/small.json" ] || fail "no output written"
rm "$dir/out/small.json"

# 3. Ctrl-C before the watched work (the corpus still being read from a FIFO): at once, as cleanly.
mkfifo "$dir/fifo"
set -m  # a job of its own, so SIGINT is not ignored as in a background job
"$ft" units --checkpoint "$model" --layer 0 --corpus - -o "$dir/out/units.json" <"$dir/fifo" 2>"$dir/err" &
pid=$!
set +m
exec 3>"$dir/fifo"
sleep 1
kill -INT "$pid"
wait "$pid"
status=$?
exec 3>&-
[ "$status" = 130 ] || fail "exit status $status after SIGINT, expected 130"
[ "$(cat "$dir/err")" = "error: interrupted (Ctrl-C); nothing was written" ] || fail "stderr: $(cat "$dir/err")"
[ -z "$(ls -A "$dir/out")" ] || fail "the -o folder holds $(ls -A "$dir/out")"

# 4. A corpus so long that tokenizing it takes seconds (the shipped one, 1,000 times: 450,000 lines): its
# tokenizing shows progress too, and Ctrl-C there ends it as cleanly.
for _ in $(seq 50); do cat "$dir/corpus.txt"; done >"$dir/huge.txt"
# A server of its own: a new session on the socket of a server still shutting down finds it gone.
t kill-server 2>/dev/null
sock=$dir/tmux-tokenizing.sock
t new-session -d -x 200 -y 20 "'$ft' units --checkpoint '$model' --layer 0 --corpus '$dir/huge.txt' -o '$dir/out/huge.txt'; echo \"[exit \$?]\"; sleep 60"
wait_for "tokenizing the corpus: "
screen | grep -qE "tokenizing the corpus: [0-9,]+ of 450,000 \([0-9]+%\)" || { screen; fail "the progress line counts the corpus's lines"; }
t send-keys C-c
wait_for "[exit 130]"
[ "$(screen | grep -c '^error: interrupted (Ctrl-C); nothing was written$')" = 1 ] || { screen; fail "one line says it was interrupted"; }
[ -z "$(ls -A "$dir/out")" ] || fail "the -o folder holds $(ls -A "$dir/out")"
echo "progress on a terminal, none on a file; Ctrl-C: exit 130, one line, no output; the same while tokenizing"
