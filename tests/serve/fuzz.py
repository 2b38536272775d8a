#!/usr/bin/python3
"""serve against hostile requests: malformed JSON, a huge body, values out of range or of the wrong
kind, values that are not finite, models it was not given, another site's Host header, a client
that sends half a request and waits, more work than its queue holds and work past its time limit.
Each is answered 400, 403, 413 or 503 with a one-line JSON reason, and the server still answers a
good request after them all.

    fuzz.py FFN_TRACE CHECKPOINT
"""
import json
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from server import Server  # noqa: E402

ffn_trace, checkpoint = sys.argv[1:3]
prompt = "The capital of France is"
failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += not ok


def refused(s, status, path, body, what, **kw):
    got, answer = s.post(path, body, **kw)
    one_line = isinstance(answer, dict) and isinstance(answer.get("error"), str) and "\n" not in answer["error"]
    check(got == status and one_line, f"{what}: {got} {answer!r:.160}")


def still_answers(s):
    got, answer = s.post("/api/prompt", {"prompt": prompt})
    check(got == 200 and answer["prediction"]["top"][0]["token"] == " Paris", "the server still answers a good request")


with Server(ffn_trace, [checkpoint]) as s:
    for body, what in [("{", "a JSON object cut short"), ("[1, 2]", "a list, not an object"), ("null", "null"),
                       (b'{"prompt": "\xff\xfe"}', "a string that is not UTF-8"), ("", "an empty body"),
                       ('{"prompt": "a"' + "}" * 10000, "ten thousand closing braces"),
                       ("[" * 5000 + "]" * 5000, "lists nested five thousand deep")]:
        refused(s, 400, "/api/prompt", body, f"malformed: {what}")
    for path, body, what in [
        ("/api/prompt", {"prompt": 5}, "a prompt that is a number"),
        ("/api/prompt", {"prompt": ""}, "an empty prompt"),
        ("/api/prompt", {"prompt": "x" * 5000}, "a prompt of 5000 bytes"),
        ("/api/prompt", {"prompt": " France" * 70}, "a prompt longer than the model's 64 positions"),
        ("/api/prompt", {"prompt": prompt, "top": 0}, "top 0"),
        ("/api/prompt", {"prompt": prompt, "top": 10**30}, "top 10^30"),
        ("/api/run", {"prompt": prompt, "ablate": ["2:1"]}, "a unit of layer 2 of a model of 2 layers"),
        ("/api/run", {"prompt": prompt, "ablate": ["1"]}, "a unit without its layer"),
        ("/api/run", {"prompt": prompt, "ablate": ["abc"]}, "a unit that is no number"),
        ("/api/run", {"prompt": prompt, "ablate": "1:1"}, "units that are a string, not a list"),
        ("/api/run", {"prompt": prompt, "ablate": ["1:99999"]}, "a unit beyond the layer's"),
        ("/api/run", {"prompt": prompt, "ablate": [f"1:{j}" for j in range(65)]}, "65 units knocked out"),
        ("/api/run", {"prompt": prompt, "ablate": ["0-5"]}, "a unit that is no number"),
        ("/api/run", {"prompt": prompt, "intervene": ["1:3*nan"]}, "a factor that is not a number"),
        ("/api/run", {"prompt": prompt, "intervene": ["1:3@9=0"]}, "a change at a token beyond the prompt"),
        ("/api/run", {"prompt": prompt, "intervene": ["1:3=mean"]}, "a mean, which reads the whole corpus"),
        ("/api/run", {"prompt": prompt, "intervene": ["3*0.5"]}, "a change to a unit without its layer"),
        ("/api/unit", {"layer": 1, "unit": "1,2"}, "two units for one page"),
        ("/api/prompt", {"prompt": prompt, "session": 5}, "a session that is a number"),
        ("/api/prompt", {"prompt": prompt, "session": "0" * 32}, "a session never opened"),
        ("/api/undo", {}, "an undo without a session"),
        ("/api/session/end", {"session": ["a"]}, "a session to end that is a list"),
        ("/api/edit", {"prompt": prompt, "subject": "France", "target": " Rome", "at": "middle"}, "an edit at neither the subject nor the last token"),
        ("/api/locate", {"prompt": prompt, "subject": "Spain"}, "a subject not in the prompt"),
        ("/api/locate", {"prompt": prompt, "subject": "France", "samples": 51}, "51 samples"),
        ("/api/edit", {"prompt": prompt, "subject": "France", "target": " Rome Paris"}, "a target of two tokens"),
        ("/api/prompt", {"prompt": prompt, "model": 1}, "model 1 of one model"),
        ("/api/prompt", {"prompt": prompt, "model": "atlas"}, "a model not given at start"),
        ("/api/prompt", {"prompt": prompt, "model": "../atlas"}, "a path as the model"),
        ("/api/prompt", {"prompt": prompt, "model": 0.5}, "a model that is a fraction"),
        # round seven: numbers of the wrong kind, units and layers the model has not, values that are not finite
        ("/api/prompt", {"prompt": None}, "a prompt that is null"),
        ("/api/prompt", {"prompt": prompt, "top": -1}, "top -1"),
        ("/api/prompt", {"prompt": prompt, "top": 1.5}, "top 1.5"),
        ("/api/prompt", {"prompt": prompt, "top": "3"}, "top that is a string"),
        ("/api/prompt", {"prompt": prompt, "top": True}, "top that is true"),
        ("/api/unit", {"layer": -1, "unit": "1"}, "layer -1"),
        ("/api/unit", {"layer": 2, "unit": "1"}, "layer 2 of a model of 2 layers"),
        ("/api/unit", {"layer": 0, "unit": "0:1"}, "an expert's unit in a dense layer"),
        ("/api/unit", {"layer": 0, "unit": 3}, "a unit that is a number, not a string"),
        ("/api/run", {"prompt": prompt, "ablate": [5]}, "units that are numbers, not strings"),
        ("/api/run", {"prompt": prompt, "ablate": ["1:0:3"]}, "an expert's unit in a dense layer"),
        ("/api/run", {"prompt": prompt, "intervene": ["1:3*1e999"]}, "a factor that overflows to inf"),
        ("/api/run", {"prompt": prompt, "intervene": ["1:3=-inf"]}, "a value that is -inf"),
        ("/api/run", {"prompt": prompt, "intervene": [None]}, "a change that is null"),
        ("/api/locate", {"prompt": prompt, "subject": ""}, "an empty subject"),
        ("/api/locate", {"prompt": prompt, "subject": "France", "samples": 0}, "0 samples"),
        ("/api/locate", {"prompt": "France", "subject": "France"}, "a subject that is the whole prompt"),
        ("/api/edit", {"prompt": prompt, "subject": "France", "target": ""}, "an empty target"),
        ("/api/edit", {"prompt": prompt, "subject": "France", "target": " Rome", "layer": 2}, "an edit of layer 2 of 2"),
        ("/api/edit", {"prompt": prompt, "subject": "France", "target": " Rome", "at": 4}, "an edit at a number"),
        ("/api/edit", {"prompt": prompt, "subject": "France", "target": " Rome", "keep": True}, "an edit kept without a session"),
    ]:
        refused(s, 400, path, body, what)
    refused(s, 413, "/api/prompt", json.dumps({"prompt": "x" * (1 << 20)}), "a body of 1 MB")
    refused(s, 403, "/api/prompt", {"prompt": prompt}, "another site's Host header (DNS rebinding)",
            headers={"Host": "attacker.example:%d" % s.port, "Content-Type": "application/json"})
    got, answer = s.request("POST", "/api/prompt", {"prompt": prompt}, headers={"Origin": "http://attacker.example"})
    cors = [h for h in s.last_headers if h.lower().startswith("access-control-")]
    check(got == 200 and not cors, f"a request from another origin has no CORS headers, so its page cannot read the answer {cors}")
    got, answer = s.get("/nothing")
    check(got == 404 and "error" in answer, f"an unknown path: {got}")

    # A client that sends half a request and waits: the others are answered meanwhile, and it is dropped.
    slow = socket.create_connection((s.host, s.port), timeout=30)
    slow.sendall(b"POST /api/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    still_answers(s)
    try:
        dropped = slow.recv(4096) is not None  # the connection closed, or answered
    except socket.timeout:
        dropped = False  # still held after 30 s
    except OSError:
        dropped = True  # reset
    check(dropped, "the slow client is dropped (the read time limit)")
    slow.close()
    still_answers(s)

# More work than the queue holds: 503 at once for those beyond it.
with Server(ffn_trace, [checkpoint], "--queue", "1") as s:
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(
        s.post("/api/locate", {"prompt": prompt, "subject": "France", "samples": 50})[0])) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    check(len(answers) == 8 and set(answers) <= {200, 503} and 503 in answers and 200 in answers,
          f"eight traces at once with a queue of one: each 200 or 503, some of both ({sorted(answers)})")
    still_answers(s)

# Work past the time limit is stopped: 503. The prompt is long (26 tokens) so that the trace takes
# several times the limit even on an idle machine, where the short prompt's took less than 0.1 s.
long_prompt = "The capital of Spain is Madrid. The capital of Italy is Rome. The capital of Japan is Tokyo. " + prompt
with Server(ffn_trace, [checkpoint], "--time-limit", "0.1") as s:
    refused(s, 503, "/api/locate", {"prompt": long_prompt, "subject": "France", "samples": 50}, "a trace longer than 0.1 s")
    still_answers(s)
    code = s.stop()
    check(code in (0, 130), f"Ctrl-C stops it: exit {code}")
sys.exit(1 if failures else 0)
