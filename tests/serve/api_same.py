#!/usr/bin/python3
"""serve's API answers the same questions with the same JSON as the commands: each request's answer
against the command line's `--format json` for the same checkpoint, prompt and options, compared by
tests/cli/json_same.py (every number equal to 1e-12; the two run the same library calls, so any
difference is a second computation or a second serialiser).

    api_same.py FFN_TRACE CHECKPOINT WORK_DIR
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from server import Server  # noqa: E402

ffn_trace, checkpoint, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
same = os.path.join(os.path.dirname(__file__), "..", "cli", "json_same.py")
prompt = "The capital of France is"
questions = [
    ("/api/prompt", {"prompt": prompt, "top": 5}, ["run", "--prompt", prompt, "--layer", "all", "--top", "5"]),
    ("/api/run", {"prompt": prompt, "ablate": ["1:3", "0:172"], "intervene": ["1:7@last*0.5", "0:5=2"]},
     ["run", "--prompt", prompt, "--layer", "all", "--ablate", "1:3,0:172", "--intervene", "1:7@last*0.5", "--intervene", "0:5=2"]),
    ("/api/unit", {"layer": 0, "unit": "3", "top": 4}, ["units", "--layer", "0", "--unit", "3", "--top", "4"]),
    ("/api/locate", {"prompt": prompt, "subject": "France", "samples": 3},
     ["locate", "--prompt", prompt, "--subject", "France", "--samples", "3"]),
    ("/api/edit", {"prompt": prompt, "subject": "France", "target": " Rome"},
     ["edit", "--prompt", prompt, "--subject", "France", "--target", " Rome"]),
]
failed = 0
answers = {}
with Server(ffn_trace, [checkpoint], "--time-limit", "600") as s:  # the edit takes a minute under the sanitizers
    for path, body, args in questions:
        status, answer = s.post(path, body)
        name = path.rsplit("/", 1)[1]
        cli = subprocess.run([ffn_trace, args[0], "--checkpoint", checkpoint, *args[1:], "--format", "json"],
                             capture_output=True, text=True, timeout=120)
        if status != 200 or cli.returncode not in (0, 1):
            print(f"{path}: status {status} {answer!r:.300}; the command's exit {cli.returncode} {cli.stderr!r}")
            failed += 1
            continue
        answers[name] = answer
        a, b = os.path.join(work, f"{name}.api.json"), os.path.join(work, f"{name}.cli.json")
        with open(a, "w") as f:
            json.dump(answer, f)
        with open(b, "w") as f:
            f.write(cli.stdout)
        r = subprocess.run(["/usr/bin/python3", same, a, b, "1e-12"], capture_output=True, text=True, timeout=60)
        print(f"{path} against {args[0]}: {(r.stdout + r.stderr).strip()}")
        failed += r.returncode != 0
    # The changes move the lens as well as the prediction: some cell of the grid differs from the
    # unchanged model's, whose prediction the changed answer gives as its baseline.
    if "prompt" in answers and "run" in answers:
        plain, changed = answers["prompt"], answers["run"]
        moved = sum(abs(p["prob"] - c["prob"]) > 1e-9 for pr, cr in zip(plain["lens_grid"], changed["lens_grid"]) for p, c in zip(pr, cr))
        base, top = changed["baseline_prediction"]["top"][0], plain["prediction"]["top"][0]
        same_base = base["id"] == top["id"] and abs(base["prob"] - top["prob"]) < 1e-12
        print(f"/api/run's lens against /api/prompt's: {moved} cells moved; the baseline is the unchanged prediction: {same_base}")
        failed += moved == 0 or not same_base
    code = s.stop()
    if code not in (0, 130):
        print(f"serve exited {code} on Ctrl-C")
        failed += 1
sys.exit(1 if failed else 0)
