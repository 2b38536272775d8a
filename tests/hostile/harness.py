"""The harness of the hostile rounds (round5.py, round6.py): a scratch folder, each case run against
the binary and judged — one stderr line starting `error:` that matches the case's pattern, exit
status 2, nothing on stdout, within a time bound, every file of the scratch folder as it was —
and the table of the cases printed at the end.

    import harness; harness.start(FFN_TRACE, "hostile6.")
"""
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ft = ""
work = ""
results = []


def start(binary, prefix):
    """Makes the scratch folder that every case runs in."""
    global ft, work
    ft = binary
    work = tempfile.mkdtemp(prefix=prefix)


def finish():
    """The scratch folder removed, the table printed; exits 1 when a case failed."""
    shutil.rmtree(work, ignore_errors=True)
    width = max(len(r[0]) for r in results)
    for name, outcome, line in results:
        print(f"{name:<{width}}  {outcome}  {line}")
    failed = sum(1 for r in results if r[1] != "ok")
    print(f"{len(results) - failed} of {len(results)} hold")
    sys.exit(1 if failed else 0)


def snapshot():
    """Every regular file of the scratch folder and its hash (FIFOs and devices left alone)."""
    seen = {}
    for root, dirs, files in os.walk(work):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                seen[path] = hashlib.sha256(f.read()).hexdigest()
    return seen


def case(name, args, pattern, status=2, timeout=20, stdin=None):
    """One hostile run: ARGS after the binary; PATTERN the error line's regex after `error: `."""
    before = snapshot()
    # the sanitizer tree's instrumented runs are slower: it sets a longer bound for every command
    timeout = max(timeout, float(os.environ.get("FFN_TRACE_TEST_TIMEOUT", "0")))
    try:
        p = subprocess.run([ft] + args, cwd=work, capture_output=True, timeout=timeout, stdin=stdin or subprocess.DEVNULL)
        rc, out, err = p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        rc, out, err = "hang", "", ""
    why = []
    if status == 0:  # a case that must run: exit 0 and no inf or NaN printed
        if re.search(r"\b(nan|inf|-inf)\b", out, re.IGNORECASE):
            why.append("printed inf or NaN")
        out, err = "", "error: (ran)"
    if rc != status:
        why.append(f"exit {rc}")
    if out:
        why.append(f"stdout {out[:80]!r}")
    lines = err.splitlines()
    if rc != "hang" and (len(lines) != 1 or not re.match(r"^error: .*(?:" + pattern + ")", lines[0])):
        why.append(f"stderr {err[:300]!r}")
    after = snapshot()
    changed = [p for p in before if before[p] != after.get(p)]
    if changed:
        why.append(f"changed {changed}")
    results.append((name, "ok" if not why else "FAIL: " + "; ".join(why), lines[0][:110] if lines else ""))


def put(path, data):
    path = os.path.join(work, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


def safetensors(header, data=b""):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)
