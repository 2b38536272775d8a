#!/usr/bin/python3
"""serve keeps a page's edit for its session alone: after a ROME edit kept in session A, A's prompt
answer and knock-out are the edited model's and session B's (and a request without a session) the
model's given at start; after an undo A's edit is gone, and once A has ended it is refused. The edited model's
P(new) on the prompt is checked against the edit's own efficacy, computed by the edit another way
(the edited layer's output patched in, not W2 replaced), and the edited model's prediction against
`edit --save`'s written checkpoint run by `run --layer all`. The sessions are bounded: opening more
than 16 ends the least recently used.

    sessions.py FFN_TRACE CHECKPOINT WORK_DIR
"""
import os
import shutil
import subprocess
import json
import sys

sys.path.insert(0, os.path.dirname(__file__))
from server import Server  # noqa: E402

ffn_trace, checkpoint, work = sys.argv[1:4]
prompt = "The capital of France is"
failures = []


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        failures.append(what)


def top(s, session=None, path="/api/prompt", **extra):
    body = {"prompt": prompt, **extra}
    if session:
        body["session"] = session
    status, answer = s.post(path, body)
    assert status == 200, f"{path}: {status} {answer!r:.300}"
    return answer


with Server(ffn_trace, [checkpoint], "--time-limit", "600") as s:  # the edit takes a minute under the sanitizers
    a, b = s.post("/api/session", {})[1]["session"], s.post("/api/session", {})[1]["session"]
    check(a != b and len(a) == 32, "each page gets a session of its own, 128 random bits")
    plain = top(s, a)["prediction"]["top"][0]
    status, edit = s.post("/api/edit", {"prompt": prompt, "subject": "France", "target": " Rome", "layer": 0, "at": "last", "keep": True, "session": a})
    assert status == 200, f"/api/edit: {status} {edit!r:.300}"
    new = edit["efficacy"]["new"]
    check(edit["taken"], f"the edit toward {new!r} took on the prompt")

    edited = top(s, a)
    got = next(t for t in edited["prediction"]["top"] if t["token"] == new)
    check(edited["prediction"]["top"][0]["token"] == new, f"session A's prompt now answers {new!r}")
    check(abs(got["prob"] - edit["efficacy"]["after"]["p_new"]) < 1e-9,
          f"session A's P({new!r}) {got['prob']:.12f} is the edit's efficacy {edit['efficacy']['after']['p_new']:.12f}")
    knocked = top(s, a, "/api/run", ablate=["0:172"])
    check(knocked["baseline_prediction"]["top"][0]["token"] == new, "session A's knock-out starts from the edited model")
    check(top(s, b)["prediction"]["top"][0] == plain, f"session B's prompt still answers {plain['token']!r}")
    check(top(s)["prediction"]["top"][0] == plain, "a request without a session runs the model given at start")

    # The same edit written by the command line and read back: the same prediction.
    saved = os.path.join(work, "edited")
    shutil.rmtree(saved, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    subprocess.run([ffn_trace, "edit", "--checkpoint", checkpoint, "--prompt", prompt, "--subject", "France", "--target", " Rome",
                    "--layer", "0", "--at", "last", "--save", saved], check=True, capture_output=True, timeout=600)
    cli = json.loads(subprocess.run([ffn_trace, "run", "--checkpoint", saved, "--prompt", prompt, "--layer", "all", "--format", "json"],
                                    check=True, capture_output=True, text=True, timeout=120).stdout)
    want = cli["prediction"]["top"][0]
    check(want["id"] == edited["prediction"]["top"][0]["id"] and abs(want["prob"] - edited["prediction"]["top"][0]["prob"]) < 1e-5,
          f"session A's prediction is the saved edit's: {want['token']!r} {want['prob']:.6f}")

    status, undone = s.post("/api/undo", {"session": a})
    check(status == 200 and undone["undone"], "the edit is undone")
    check(top(s, a)["prediction"]["top"][0] == plain, f"after the undo session A answers {plain['token']!r} again")

    status, ended = s.post("/api/session/end", {"session": a})
    check(status == 200 and ended["ended"], "session A ends")
    status, answer = s.post("/api/prompt", {"prompt": prompt, "session": a})
    check(status == 400 and answer["error"].startswith("session: no such session"), f"an ended session is refused: {answer}")

    status, answer = s.post("/api/edit", {"prompt": prompt, "subject": "France", "target": " Rome", "layer": 0, "at": "last", "keep": True})
    check(status == 400 and answer["error"].startswith("keep:"), f"an edit is kept only for a session: {answer}")
    opened = [s.post("/api/session", {})[1]["session"] for _ in range(16)]
    status, _ = s.post("/api/prompt", {"prompt": prompt, "session": b})
    check(status == 400, "16 sessions opened after B end B, the least recently used")
    status, _ = s.post("/api/prompt", {"prompt": prompt, "session": opened[-1]})
    check(status == 200, "the newest session is open")
    code = s.stop()
    check(code in (0, 130), f"serve exits {code} on Ctrl-C")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
