#!/usr/bin/python3
"""serve under load: CLIENTS clients on the loopback for SECONDS seconds, each asking in turn for a
prompt's answer, a knock-out and a unit's page. Every answer is either the very answer the server
gave to the same question asked alone before the load (tests/serve/api_same.py checks those against
the commands' JSON) or a 503 with its reason; the server's resident memory stays within
LIMIT_MB of what it held before; and it still answers after. The ctest runs it for 5 s; the
issue's version is `load.py FFN_TRACE CHECKPOINT 30 50`.

    load.py FFN_TRACE CHECKPOINT SECONDS CLIENTS [LIMIT_MB]
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from server import Server  # noqa: E402

ffn_trace, checkpoint, seconds, clients = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
limit_mb = float(sys.argv[5]) if len(sys.argv) > 5 else 300
questions = [("/api/prompt", {"prompt": p}) for p in ["The capital of France is", "The capital of Japan is", "Paris is the capital of"]]
questions += [("/api/run", {"prompt": "The capital of France is", "ablate": ["0:172"]}),
              ("/api/unit", {"layer": 1, "unit": "116", "top": 3})]


def resident_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


with Server(ffn_trace, [checkpoint]) as s:
    expected = []
    for path, body in questions:
        status, answer = s.post(path, body)
        assert status == 200, f"{path} alone: {status} {answer!r:.200}"
        expected.append(answer)
    before = peak = resident_mb(s.process.pid)
    counts = {"right": 0, "busy": 0, "wrong": 0, "failed": 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client(k):
        i = k
        while time.monotonic() < end:
            path, body = questions[i % len(questions)]
            try:
                status, answer = s.post(path, body, timeout=60)
                kind = "right" if status == 200 and answer == expected[i % len(questions)] else \
                       "busy" if status == 503 and "error" in answer else "wrong"
                if kind == "wrong":
                    print(f"wrong answer to {path}: {status} {answer!r:.200}")
            except OSError as e:
                kind = "failed"
                print(f"{path}: {e}")
            with lock:
                counts[kind] += 1
            i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, resident_mb(s.process.pid))
        time.sleep(0.1)
    status, answer = s.post(*questions[0])
    after = status == 200 and answer == expected[0]
    print(f"{clients} clients, {seconds:g} s: {counts['right']} right, {counts['busy']} busy (503), {counts['wrong']} wrong, "
          f"{counts['failed']} failed; resident memory {before:.0f} MB before, {peak:.0f} MB at most; "
          f"{'still answering' if after else 'NOT answering'} after")
    ok = counts["wrong"] == 0 and counts["failed"] == 0 and counts["right"] > 0 and peak - before <= limit_mb and after
sys.exit(0 if ok else 1)
