#!/usr/bin/env python3
"""`run --checkpoint … --prompt … --top N` stays proportional to N: the vocabulary view lists
each unit's tokens at most 10 each way (it lists up to N units a token, so lists of N tokens made
it grow as N²), and says so. Sizes, never timings: the vocabulary section of the text, Markdown
and JSON grows at most ×6.25 from N = 10 to N = 50 (five times, with a quarter to spare; as N²,
twenty-five times: 5 tokens × 50 units stay within the model's 256), and each whole output at
most tenfold from N = 10 to 100 and from 100 to 1000.

    top_sizes.py FFN_TRACE MODEL_DIR
"""
import json
import subprocess
import sys

ft, model = sys.argv[1], sys.argv[2]
prompt = "The capital of France is"
failures = []


def run(top, fmt):
    p = subprocess.run([ft, "run", "--checkpoint", model, "--layer", "0", "--prompt", prompt, "--top", str(top),
                        "--format", fmt], capture_output=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAILED: --top {top} --format {fmt} exited {p.returncode}: {p.stderr.decode()[:300]}")
    return p.stdout.decode("utf-8")


def vocabulary_section(text, fmt):
    """The vocabulary view's part of an output, in bytes."""
    if fmt == "json":
        return len(json.dumps(json.loads(text)["vocab"]["units"]).encode())
    start = text.index("What the units say in the vocabulary")
    end = text.index("Summary", start)
    return len(text[start:end].encode())


def check(what, small, large, most):
    ratio = large / small
    print(f"{what}: {small} → {large} bytes, ×{ratio:.2f}")
    if ratio > most:
        failures.append(f"{what} grew ×{ratio:.2f}, more than ×{most}")


for fmt in ("text", "markdown", "json"):
    check(f"the {fmt} vocabulary view from --top 10 to 50", vocabulary_section(run(10, fmt), fmt),
          vocabulary_section(run(50, fmt), fmt), 6.25)
    sizes = {n: len(run(n, fmt).encode()) for n in (10, 100, 1000)}
    check(f"the {fmt} output from --top 10 to 100", sizes[10], sizes[100], 10)
    check(f"the {fmt} output from --top 100 to 1000", sizes[100], sizes[1000], 10)

doc = json.loads(run(30, "json"))["vocab"]
if doc.get("tokens_per_unit") != 10:
    failures.append(f"the JSON's vocab.tokens_per_unit is {doc.get('tokens_per_unit')}, not 10")
longest = max(max(len(u["promotes"]), len(u["suppresses"])) for u in doc["units"])
if longest > 10:
    failures.append(f"a unit of the JSON lists {longest} tokens, more than 10")
if "Each unit lists 10 tokens each way at most, of the 30 asked" not in run(30, "text").replace("\n", " "):
    failures.append("the text does not say that each unit's lists stop at 10")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("each output grows with --top, not with its square")
