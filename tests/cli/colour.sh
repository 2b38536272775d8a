#!/usr/bin/env bash
# Colour checks that need a terminal (`script` gives one) or raw escape codes in the output.
#
#   colour.sh empty-no-color|set-no-color FFN_TRACE FILE
#   colour.sh quiz-empty-no-color|quiz-set-no-color FFN_TRACE FILE
#   colour.sh plot FFN_TRACE
set -u
esc=$'\x1b['
case "$1" in
    empty-no-color|set-no-color)
        value=; [ "$1" = set-no-color ] && value=1
        # `script` needs a pseudo-terminal; without one (a bare chroot) there is nothing to test.
        script -qec true /dev/null >/dev/null 2>&1 || { echo "skipped: no pseudo-terminal for script"; exit 77; }
        out=$(NO_COLOR=$value script -qec "\"$2\" run \"$3\"" /dev/null)
        case "$out" in *"Step 1"*) ;; *) echo "FAILED: no walkthrough in the terminal"; exit 1 ;; esac
        if [ "$1" = empty-no-color ]; then
            [[ "$out" == *"${esc}31m"* ]] || { echo "FAILED: NO_COLOR= turned colour off"; exit 1; }
        else
            [[ "$out" != *"$esc"* ]] || { echo "FAILED: NO_COLOR=1 left colour on"; exit 1; }
        fi
        ;;
    quiz-empty-no-color|quiz-set-no-color)
        value=; [ "$1" = quiz-set-no-color ] && value=1
        script -qec true /dev/null >/dev/null 2>&1 || { echo "skipped: no pseudo-terminal for script"; exit 77; }
        # stdout is the terminal; the answers end at once (no input), so the session prints its score
        out=$(NO_COLOR=$value script -qec "\"$2\" quiz \"$3\" </dev/null" /dev/null)
        case "$out" in *"Score:"*) ;; *) echo "FAILED: no quiz in the terminal"; exit 1 ;; esac
        if [ "$1" = quiz-empty-no-color ]; then
            [[ "$out" == *"${esc}1m"* ]] || { echo "FAILED: NO_COLOR= turned the quiz's colour off"; exit 1; }
        else
            [[ "$out" != *"$esc"* ]] || { echo "FAILED: NO_COLOR=1 left the quiz's colour on"; exit 1; }
        fi
        ;;
    plot)
        out=$("$2" gelu-table --plot --exact --color always)
        for mark in "${esc}34m○" "${esc}31m●" "${esc}33m◆"; do
            [[ "$out" == *"$mark"* ]] || { echo "FAILED: no coloured mark ${mark#"$esc"}"; exit 1; }
        done
        out=$("$2" gelu-table --plot --exact --color never)
        [[ "$out" != *"$esc"* ]] || { echo "FAILED: --color never coloured the plot"; exit 1; }
        ;;
esac
