#!/usr/bin/env python3
"""`ffn-trace run --ablate` across layers and `--ablate-random` against NumPy float64.

The shipped atlas model, read by the NumPy reference of tests/locate/reference_model.py: P(target)
with units of several layers and a whole FFN knocked out; the random baseline's active units (the
layer's activation above 0 at the last token), each sampled set's P(target) against a separate
`run --ablate` of the same units and against the reference, and its median and quartiles against
NumPy's percentile.

Usage: reference_test.py FFN_TRACE DATA_DIR   (exit 77 without numpy)
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: no numpy (scripts/install-deps.sh installs python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "locate"))
from reference_model import model  # noqa: E402

ft, data = sys.argv[1:3]
atlas = os.path.join(data, "models", "atlas")
prompt, layer = "The capital of France is", 1
failures = []


def run(*args):
    done = subprocess.run([ft, "run", "--checkpoint", atlas, "--layer", str(layer), "--prompt", prompt, *args, "--format", "json"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAILED: run {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def target_after(got):
    """P(target) after the knock-out: the baseline's top token's `after`."""
    target = got["baseline_prediction"]["top"][0]["id"]
    return next(c["after"] for c in got["changes"] if c["id"] == target), target


m = model(atlas)
plain = run()
ids = plain["prompt"]["token_ids"]
x = m.embed(ids)[None]


def reference_prob(target, units=None, silenced=()):
    """P(target) at the last token with units {layer: [unit, ...]} set to 0 and whole FFNs silenced."""
    def zeroed(chosen):
        def f(a):
            a = a.copy()
            a[:, :, chosen] = 0
            return a
        return f
    m.units = {l: zeroed(u) for l, u in (units or {}).items()}
    m.silenced = set(silenced)
    p = m.run(x.copy())[0][0, target]
    m.units, m.silenced = {}, set()
    return p


def close(name, got, want, tol):
    if not abs(got - want) <= tol:
        failures.append(f"{name}: {got!r}, the reference {want!r} (tolerance {tol})")


# units of several layers and a whole FFN, in one run
got = run("--ablate", "168,0:44,2:*")
if got["ablated"] != [{"unit": 168}] or got["ablated_layers"] != [{"layer": 0, "units": [{"unit": 44}], "whole": False},
                                                                  {"layer": 2, "units": [], "whole": True}]:
    failures.append(f"ablated {got['ablated']}, ablated_layers {got['ablated_layers']}")
p, target = target_after(got)
close("P(target) with unit 168 of layer 1, unit 44 of layer 0 and layer 2's FFN knocked out", p,
      reference_prob(target, {1: [168], 0: [44]}, {2}), 1e-9)
print(f"knock-outs across layers: P {p:.6f}")

# the random baseline: K random active units, S sets
K, S, seed = 5, 6, 7
got = run("--ablate-random", str(K), "--samples", str(S), "--seed", str(seed))
b = got["random_knock_outs"]
m.units = {layer: lambda a: a}
m.run(x.copy())
m.units = {}
active = set(np.flatnonzero(m.kept_units[layer][0, -1] > 0).tolist())
if b["k"] != K or b["seed"] != seed or len(b["sets"]) != S or len(b["prob"]) != S or b["active"] != len(active):
    failures.append(f"random_knock_outs k {b['k']}, seed {b['seed']}, {len(b['sets'])} sets, active {b['active']} "
                    f"(the reference's {len(active)})")
for i, (units, prob) in enumerate(zip(b["sets"], b["prob"])):
    if len(set(units)) != K or not set(units) <= active:
        failures.append(f"set {i}: {units} is not {K} distinct active units")
        continue
    alone, _ = target_after(run("--ablate", ",".join(map(str, units))))
    close(f"set {i} {units}: P(target) against run --ablate", prob, alone, 1e-12)
    close(f"set {i} {units}: P(target) against the reference", prob, reference_prob(target, {layer: units}), 1e-9)
close("median", b["median"], float(np.percentile(b["prob"], 50)), 1e-15)
close("lower quartile", b["quartiles"][0], float(np.percentile(b["prob"], 25)), 1e-15)
close("upper quartile", b["quartiles"][1], float(np.percentile(b["prob"], 75)), 1e-15)
if len({tuple(s) for s in b["sets"]}) < 2:
    failures.append(f"the {S} sets are all the same: {b['sets'][0]}")
print(f"random baseline: {S} sets of {K} of {len(active)} active units, median {b['median']:.4f}, "
      f"top {K} {got['sweep']['prob'][K]:.4f}")

for f in failures:
    print("FAILED:", f)
sys.exit(1 if failures else 0)
