#!/usr/bin/python3
"""`ffn-trace serve`'s answers timed on the loopback, one client, as the page asks them: a typed
prompt's answer (/api/prompt, each prefix of the prompts as they are typed), a knock-out of the top
unit (/api/run) and causal tracing with 10 samples (/api/locate). Prints each one's median and 95th
percentile in milliseconds, per model. A benchmark for people, not a test.

    bench_serve.py FFN_TRACE CHECKPOINT [CHECKPOINT ...]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "serve"))
from server import Server  # noqa: E402

ffn_trace, checkpoints = sys.argv[1], sys.argv[2:]
sentences = ["The capital of France is", "The capital of Japan is", "Paris is the capital of", "The language of Spain is"]
typed = [s[:n] for s in sentences for n in range(8, len(s) + 1)]  # each keystroke from the eighth on


def timed(s, path, body):
    started = time.perf_counter()
    status, answer = s.post(path, body)
    elapsed = (time.perf_counter() - started) * 1000
    assert status == 200, f"{path}: {status} {answer!r:.200}"
    return elapsed, answer


def p95(xs):
    return sorted(xs)[max(0, int(round(0.95 * len(xs))) - 1)]


print("| model | request | n | median ms | p95 ms |")
print("| --- | --- | --- | --- | --- |")
for c in checkpoints:
    with Server(ffn_trace, [c]) as s:
        name = os.path.basename(os.path.normpath(c))
        prompts = [timed(s, "/api/prompt", {"prompt": p})[0] for p in typed]
        _, answer = timed(s, "/api/prompt", {"prompt": sentences[0]})
        best = max(({"layer": l["layer"], **l["units"][0]} for l in answer["layers"]), key=lambda u: u["score"])
        knock = [timed(s, "/api/run", {"prompt": sentences[0], "ablate": [f"{best['layer']}:{best['unit']}"]})[0]
                 for _ in range(40)]
        trace = [timed(s, "/api/locate", {"prompt": sentences[0], "subject": "France", "samples": 10})[0] for _ in range(20)]
        for what, xs in [("a typed prompt's answer", prompts), (f"knock-out of layer {best['layer']} unit {best['unit']}", knock),
                         ("causal tracing, 10 samples", trace)]:
            print(f"| {name} | {what} | {len(xs)} | {statistics.median(xs):.1f} | {p95(xs):.1f} |")
