#!/usr/bin/python3
"""Whether two JSON outputs of ffn-trace agree: the same fields in the same order, the same lists,
strings, integers and booleans, and every real number equal to TOLERANCE, relative (absolute
below 1): |a − b| ≤ TOLERANCE · max(1, |a|, |b|). Exits 0 when they agree (printing how many
numbers were compared), else 1 with the first place they differ.

    json_same.py A.json B.json TOLERANCE [FIELD_TO_SKIP ...]
"""
import json
import math
import sys


def main():
    a, b = (json.load(open(p)) for p in sys.argv[1:3])
    tolerance, skip = float(sys.argv[3]), set(sys.argv[4:])
    count = 0

    def same(x, y, at):
        nonlocal count
        if isinstance(x, dict):
            assert isinstance(y, dict) and list(x) == list(y), f"{at}: fields {list(x)} against {list(y)}"
            for k in x:
                if k not in skip:
                    same(x[k], y[k], f"{at}.{k}")
        elif isinstance(x, list):
            assert isinstance(y, list) and len(x) == len(y), f"{at}: lengths differ"
            for i, (u, v) in enumerate(zip(x, y)):
                same(u, v, f"{at}[{i}]")
        elif isinstance(x, float) or isinstance(y, float):
            assert math.isfinite(x) and abs(x - y) <= tolerance * max(1.0, abs(x), abs(y)), f"{at}: {x!r} against {y!r}"
            count += 1
        else:
            assert x == y, f"{at}: {x!r} against {y!r}"

    try:
        same(a, b, "")
    except (AssertionError, TypeError) as e:
        sys.exit(f"differs: {e}")
    print(f"{count} numbers agree")


if __name__ == "__main__":
    main()
