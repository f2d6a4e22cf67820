#!/usr/bin/env python3
"""The downstream of scripts/soak.sh: an HTTP service that weir's HTTP handler POSTs jobs to.

Each POST of one job (`{"id", "kind", "attempt", "max_attempts", "payload"}`) waits a
latency (the payload's `ms`, default 5), then answers, by a seeded draw per request:
429 with `Retry-After: 1` (`--p429`), a plain 500 (`--p500`), or 200. It keeps, per job id,
how many times it answered 200 (the runs that acked it) and how many requests it saw.

GET /summary answers `{"ok": {id: count}, "requests": n, "answers": {"200": n, ...}}`.
Only loopback: it binds 127.0.0.1.
"""

import argparse
import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
OK = {}
ANSWERS = {}
REQUESTS = [0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    rng = random.Random(1)
    p429 = 0.0
    p500 = 0.0

    def log_message(self, *args):  # quiet: thousands of requests
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/summary":
            return self.answer(404)
        with LOCK:
            body = json.dumps({"ok": OK, "requests": REQUESTS[0], "answers": ANSWERS}).encode()
        self.answer(200, body, [("Content-Type", "application/json")])

    def do_POST(self):
        job = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        payload = job.get("payload") or {}
        time.sleep(payload.get("ms", 5) / 1000)
        with LOCK:
            draw = Handler.rng.random()
            REQUESTS[0] += 1
        if draw < Handler.p429:
            status = 429
        elif draw < Handler.p429 + Handler.p500:
            status = 500
        else:
            status = 200
        with LOCK:
            ANSWERS[str(status)] = ANSWERS.get(str(status), 0) + 1
            if status == 200:
                OK[job["id"]] = OK.get(job["id"], 0) + 1
        if status == 429:
            return self.answer(429, b"slow down", [("Retry-After", "1")])
        if status == 500:
            return self.answer(500, b"broken endpoint")
        self.answer(200, b"ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--p429", type=float, default=0.05)
    ap.add_argument("--p500", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    Handler.rng = random.Random(a.seed)
    Handler.p429, Handler.p500 = a.p429, a.p500
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    # a killed consumer's connections break mid-answer: expected here, not worth a trace
    server.handle_error = lambda request, client_address: None
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
