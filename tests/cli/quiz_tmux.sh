#!/usr/bin/env bash
# Runs `ffn-trace quiz` in a real terminal: tmux, 80 × 40, keys typed one answer at a time (a
# wrong one, ?, then right ones), and compares the session on the screen with a golden file.
#
#   quiz_tmux.sh FFN_TRACE EXAMPLE GOLDEN_FILE
#
# Exit 77 (skipped) when tmux is not installed. FFN_TRACE_UPDATE_GOLDEN=1 rewrites the golden file.
set -u
ft=$1 example=$2 golden=$3
command -v tmux >/dev/null || { echo "tmux is not installed: skipped"; exit 77; }
dir=$(mktemp -d)
sock=$dir/tmux.sock
# A server of its own, so that no other tmux session is touched.
t() { tmux -S "$sock" "$@"; }
trap 't kill-server 2>/dev/null; rm -rf "$dir"' EXIT
# NO_COLOR: the quiz's colours are off in the terminal as in every other subcommand.
# From the example's folder, so that the screen names it the same in every checkout.
cd "$(dirname "$example")" || exit 1
t new-session -d -x 80 -y 40 "env NO_COLOR=1 LC_ALL=C.UTF-8 '$ft' quiz '$(basename "$example")'; echo \"[exit \$?]\"; sleep 60"
screen() { t capture-pane -p -S -; }  # the whole session, scrolled-off lines too
# Waits until the screen shows TEXT (a fixed string), for up to 10 seconds.
wait_for() {
    for _ in $(seq 100); do
        screen | grep -qF -- "$1" && return 0
        sleep 0.1
    done
    echo "FAILED: the screen never showed: $1"
    screen
    exit 1
}
answer() { t send-keys -l -- "$1"; t send-keys Enter; }
wait_for "hidden[1] = ? >"
answer 2           # wrong: the formula
wait_for "Hint 1 of 3"
answer "?"         # the numbers
wait_for "Hint 2 of 3"
answer 1           # right, after hints
wait_for "Question 2 of 4"
answer 1
wait_for "Question 3 of 4"
answer 4
wait_for "Question 4 of 4"
answer 5
wait_for "[exit "
actual=$dir/screen.txt
# The screen without the blank rows below the text.
screen | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$actual"
if [ "${FFN_TRACE_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$actual" "$golden"
    echo "updated $golden"
    exit 0
fi
diff -u "$golden" "$actual" || { echo "FAILED: the screen differs from $golden"; exit 1; }
