"""Starts `ffn-trace serve` on a free port of the loopback for a test, and asks it questions.

    with Server(ffn_trace, [checkpoint, ...]) as s:
        status, answer = s.post("/api/prompt", {"prompt": "..."})

Every wait has a time limit, and the server is ended (by its id) when the block ends, whatever happened.
"""
import http.client
import json
import signal
import subprocess


class Server:
    def __init__(self, ffn_trace, checkpoints, *extra):
        args = [ffn_trace, "serve", "--port", "0"]
        for c in checkpoints:
            args += ["--checkpoint", c]
        self.process = subprocess.Popen(args + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("serve did not start in 60 s")))
        signal.alarm(60)
        try:
            line = self.process.stdout.readline()
        finally:
            signal.alarm(0)
        if not line.startswith("serving http://"):
            self.process.kill()
            raise RuntimeError(f"serve did not start: {line!r} {self.process.stderr.read()!r}")
        self.url = line.split()[1]
        self.host, self.port = self.url[len("http://"):].rstrip("/").rsplit(":", 1)
        self.port = int(self.port)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.stop()

    def stop(self):
        """Ctrl-C, as a user stops it; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, parsed JSON or the text when it is not JSON)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
            c.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
            r = c.getresponse()
            self.last_headers = dict(r.getheaders())
            text = r.read().decode()
            try:
                return r.status, json.loads(text)
            except ValueError:
                return r.status, text
        finally:
            c.close()

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)
