#!/usr/bin/env python3
"""Two JSON outputs of ffn-trace compared: the same fields in the same order, the same strings,
integers and lengths, and numbers equal to TOL, relative or absolute. Keys named by --ignore are
not compared where they stand; keys named by --only-second may stand in the second file alone
(what a GGUF run adds: "stored", or "vocab" from the tokenizer that a directory lacks).
Exits with the first difference's path.

    json_same.py A.json B.json TOL [--ignore K,...] [--only-second K,...] [--what TEXT]
"""
import argparse
import json
import math
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("tol", type=float)
    p.add_argument("--ignore", default="")
    p.add_argument("--only-second", default="")
    p.add_argument("--what", default="")
    o = p.parse_args()
    ignore, extra = set(filter(None, o.ignore.split(","))), set(filter(None, o.only_second.split(",")))
    a, b = (json.load(open(f)) for f in (o.a, o.b))

    def same(x, y, at):
        if isinstance(x, dict):
            assert isinstance(y, dict), f"{at}: an object against {y!r}"
            ys = [k for k in y if k not in extra or k in x]
            assert list(x) == ys, f"{at}: fields {list(x)} against {list(y)}"
            for k in x:
                if k not in ignore:
                    same(x[k], y[k], f"{at}.{k}")
        elif isinstance(x, list):
            assert isinstance(y, list) and len(x) == len(y), f"{at}: lengths differ"
            for i, (u, v) in enumerate(zip(x, y)):
                same(u, v, f"{at}[{i}]")
        elif isinstance(x, float) or isinstance(y, float):
            assert math.isclose(x, y, rel_tol=o.tol, abs_tol=o.tol), f"{at}: {x} against {y}"
        else:
            assert x == y, f"{at}: {x!r} against {y!r}"

    try:
        same(a, b, "")
    except AssertionError as e:
        sys.exit(f"differs: {o.what}: {e}" if o.what else f"differs: {e}")


if __name__ == "__main__":
    main()
