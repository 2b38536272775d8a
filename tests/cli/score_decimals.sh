#!/usr/bin/env bash
# The vocabulary view prints each list's scores at one number of decimals: every score of a unit's
# promotes and suppresses lists, and of a token's update, has as many decimals as the others.
#
#   score_decimals.sh FFN_TRACE MODEL_DIR
set -u
out=$("$1" run --checkpoint "$2" --layer 0 --prompt "The capital of France is" --detail summary --color never) || exit 1
printf '%s\n' "$out" | awk '
    /^What the units say in the vocabulary/ { on = 1; next }
    on && lists && /^[^ ]/ { on = 0 }   # the next heading, past the lists
    !on { next }
    /^  unit [0-9]+ promotes / || /^  ".*"'\''s update promotes / { list++; lists++ }
    {
        gsub(/"[^"]*"/, "")   # a token may be spelled with digits
        for (i = 1; i <= NF; i++)
            if ($i ~ /^-?[0-9]+\.[0-9]+,?$/) {
                sub(/,$/, "", $i)
                d = length($i) - index($i, ".")
                if (list in decimals && decimals[list] != d) {
                    print "FAILED: list " list " mixes " decimals[list] " and " d " decimals: " $0
                    bad = 1
                }
                decimals[list] = d
                scores++
            }
    }
    END {
        if (lists < 2 || scores < 20) { print "FAILED: found " lists " lists, " scores " scores"; exit 1 }
        if (!bad) print lists " lists, " scores " scores, each list at one number of decimals"
        exit bad
    }'
