#!/usr/bin/env python3
"""One weir measurement for ../shared/peers/run.sh's CANDIDATE_CMD (scripts/bench-peers-python.sh
runs it): enqueue N jobs, drain them, print run.sh's RESULT line.

Env from run.sh: REDIS_URL, N, SCENARIO (s1: no-op jobs; s2: jobs that wait 10 ms),
CONCURRENCY (0: the candidate's own), QUEUE. From bench-peers-python.sh: WEIR_CANDIDATE, one of

  py-async, py-sync  weir.Worker (clients/python/bench/bench.py) with a coroutine function or a
                     plain function as the handler, in WEIR_PYTHON (a Python with weir installed)
  node               `weir work --handler exec:'exec node W.js'`, the Node Worker (clients/node)
  http               `weir work --handler http://...` against a batch endpoint answering per-job
                     outcomes (a ThreadingHTTPServer; S2: it waits 10 ms per request, the jobs of
                     a batch together, as an endpoint that runs them concurrently would)
  cli-noop           `weir work --handler noop / sleep:10ms`: the engine with Rust handlers

and WEIR_BIN (a release `weir`), WEIR_ROOT (the checkout). The drain is timed from the worker's
start to its exit (start-up and shutdown included); `cpu_us_per_job` is the CPU of the worker
processes (weir and its exec children, or the Python process) over the drain, per job.
"""

import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

ENDPOINT = r'''
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
WAIT = float(sys.argv[2])
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        jobs = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if WAIT: time.sleep(WAIT)
        body = b'{"outcomes":[' + b",".join(b'{"i":%d,"status":"ok"}' % i for i in range(len(jobs))) + b"]}"
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 1024
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''

NODE_WORKER = '''
const { Worker } = require(%r);
const w = new Worker({ concurrency: 1000 });
w.handle('bench', %s);
w.run();
'''


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def acked(weir: str, url: str, queue: str) -> int:
    import json
    out = subprocess.run([weir, "stats", "--queue", queue, "--redis-url", url, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return int(json.loads(out)["stats"]["counters"].get("acked", 0))


def main() -> None:
    cand = os.environ["WEIR_CANDIDATE"]
    root = os.environ["WEIR_ROOT"]
    url, n, scen = os.environ["REDIS_URL"], int(os.environ["N"]), os.environ["SCENARIO"]
    queue = os.environ.get("QUEUE", "bench")
    conc = int(os.environ.get("CONCURRENCY") or 0)
    if cand in ("py-async", "py-sync"):
        env = dict(os.environ, HANDLER=cand[3:])
        bench = os.path.join(root, "clients/python/bench/bench.py")
        os.execve(os.environ["WEIR_PYTHON"], [os.environ["WEIR_PYTHON"], bench], env)

    weir = os.environ["WEIR_BIN"]
    tmp = tempfile.mkdtemp(prefix="weir-cand-")
    jobs = os.path.join(tmp, "jobs.ndjson")
    with open(jobs, "w") as f:
        f.writelines('{"kind":"bench","payload":{"n":%d}}\n' % i for i in range(n))
    server = None
    try:
        t0 = time.perf_counter()
        subprocess.run([weir, "enqueue", jobs, "--queue", queue, "--redis-url", url],
                       check=True, stdout=subprocess.DEVNULL)
        t1 = time.perf_counter()
        sleep = scen == "s2"
        args = [weir, "work", "--queue", queue, "--redis-url", url, "--drain", "--no-metrics"]
        if cand == "node":
            script = os.path.join(tmp, "w.js")
            with open(script, "w") as f:
                f.write(NODE_WORKER % (os.path.join(root, "clients/node"),
                                       "() => new Promise((r) => setTimeout(r, 10))" if sleep
                                       else "async () => {}"))
            # S1: batches as large as the engine gives; S2: one job per frame, as in-flight
            # jobs come back one by one (scripts/bench-exec.sh).
            args += ["--handler", "exec:exec node " + script, "-c", str(conc or 256)]
            if sleep:
                args += ["--exec-batch", "1"]
        elif cand == "http":
            port = free_port()
            server = subprocess.Popen([sys.executable, "-c", ENDPOINT, str(port),
                                       "0.01" if sleep else "0"])
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            args += ["--handler", "http://127.0.0.1:%d/" % port, "-c", str(conc or 256),
                     "--batch-http", "100"]
        elif cand == "cli-noop":
            args += ["--handler", "sleep:10ms" if sleep else "noop", "-c", str(conc or 256)]
        else:
            sys.exit("unknown WEIR_CANDIDATE %r" % cand)
        c0 = children_cpu()
        t2 = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        t3 = time.perf_counter()
        c1 = children_cpu()
        done = acked(weir, url, queue)
        print("RESULT enqueue_jobs_per_s=%.1f drain_jobs_per_s=%.1f completed=%d cpu_us_per_job=%.1f"
              % (n / (t1 - t0), n / (t3 - t2), done, (c1 - c0) / n * 1e6))
    finally:
        if server:
            server.kill()
            server.wait()
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
