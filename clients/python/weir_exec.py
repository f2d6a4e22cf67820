"""A worker for weir's exec handler, standard library only (Python 3.8+).

Copy this one file to a host where the native `weir` package cannot be built, then run
your program under weir:

    weir work --queue emails --handler exec:'python3 app.py'

    # app.py
    from weir_exec import Worker, Retry, Fatal, Backpressure
    worker = Worker(concurrency=64)

    @worker.handle("send_email")
    async def send_email(job):          # job.id, job.kind, job.payload, job.attempt, job.key
        ...

    @worker.handle("resize")
    def resize(job):                    # plain functions run on a thread pool
        ...

    worker.run()

weir writes batches of jobs to stdin and reads one outcome per job from stdout (the
protocol is docs/protocol.md, "exec handler protocol, version 1"), so handlers must not
print to stdout: `print` goes to stderr while the worker runs, and weir logs stderr.
Returning acks the job; raising retries it with the queue's backoff; `Retry(after=)`
retries after a delay, `Fatal` dead-letters it, `Backpressure(after=)` defers it without
charging an attempt. The worker exits when weir closes stdin, after its jobs finish.
"""

import asyncio
import concurrent.futures
import inspect
import json
import os
import sys

PROTOCOL = 1
__version__ = "0.1.0"
__all__ = ["Worker", "Job", "Retry", "Fatal", "Backpressure", "PROTOCOL"]


class Retry(Exception):
    """Retry the job, after `after` seconds if given (else the queue's backoff)."""

    def __init__(self, message="retry", after=None):
        super().__init__(message)
        self.after = after


class Fatal(Exception):
    """No retry will cure it: the job goes to the dead-letter queue with this reason."""


class Backpressure(Exception):
    """The downstream is overloaded: put the job back uncharged, after `after` seconds."""

    def __init__(self, message="backpressure", after=None):
        super().__init__(message)
        self.after = after


class Job:
    """One job: id, kind, payload (decoded JSON), attempt, max_attempts, key, deadline_ms."""

    __slots__ = ("id", "kind", "payload", "attempt", "max_attempts", "key", "deadline_ms")

    def __init__(self, d):
        self.id = d["id"]
        self.kind = d["kind"]
        self.payload = d.get("payload")
        self.attempt = d.get("attempt", 0)
        self.max_attempts = d.get("max_attempts", 0)
        self.key = d.get("key")
        self.deadline_ms = d.get("deadline_ms")

    def __repr__(self):
        return "Job(id=%r, kind=%r, attempt=%r)" % (self.id, self.kind, self.attempt)


def _ms(seconds):
    return None if seconds is None else max(0, int(seconds * 1000))


def _ok(i, d, value):
    """The ok outcome, with ``value`` as its result when the job keeps one (weir sends
    ``keep_result`` then: its queue keeps completed jobs). What JSON cannot encode is kept
    by its ``str()``."""
    o = {"i": i, "status": "ok"}
    if d.get("keep_result") and value is not None:
        try:
            json.dumps(value)
            o["result"] = value
        except (TypeError, ValueError, RecursionError):
            o["result"] = str(value)
    return o


def _outcome(i, exc):
    if exc is None:
        return {"i": i, "status": "ok"}
    if isinstance(exc, Fatal):
        return {"i": i, "status": "fail", "error": str(exc) or "Fatal"}
    if isinstance(exc, Backpressure):
        o = {"i": i, "status": "defer", "error": str(exc)}
        if exc.after is not None:
            o["after_ms"] = _ms(exc.after)
        return o
    o = {"i": i, "status": "retry", "error": ("%s: %s" % (type(exc).__name__, exc))[:2000]}
    if isinstance(exc, Retry):
        o["error"] = str(exc)
        if exc.after is not None:
            o["after_ms"] = _ms(exc.after)
    return o


class Worker:
    """Runs handlers by job kind for weir's exec handler, `concurrency` jobs at once."""

    def __init__(self, concurrency=16, threads=None):
        self.concurrency = concurrency
        self.threads = threads or concurrency
        self._handlers = {}

    def handle(self, kind, fn=None):
        """Registers `fn` for `kind`; as a decorator: `@worker.handle("kind")`."""
        if fn is not None:
            self._handlers[kind] = fn
            return fn

        def deco(f):
            self._handlers[kind] = f
            return f

        return deco

    def run(self):
        """Speaks the protocol on stdin/stdout until weir closes stdin."""
        out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
        sys.stdout = sys.stderr  # a stray print must not break the protocol
        asyncio.run(self._main(out))

    async def _main(self, out):
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 30)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        pool = concurrent.futures.ThreadPoolExecutor(self.threads)
        sem = asyncio.Semaphore(self.concurrency)

        def write(frame):
            out.write(json.dumps(frame, separators=(",", ":")).encode() + b"\n")

        hello = json.loads(await reader.readline() or b"{}")
        if hello.get("type") != "hello":
            raise SystemExit("weir_exec: the first line from weir is not a hello frame")
        write({"type": "hello", "protocol": PROTOCOL,
               "worker": "weir_exec.py/%s python/%s" % (__version__, sys.version.split()[0]),
               "concurrency": self.concurrency})

        async def one(i, d):
            async with sem:
                try:
                    job = Job(d)
                    fn = self._handlers.get(job.kind)
                    if fn is None:
                        raise Backpressure("no handler for kind %r in this worker" % job.kind, after=10)
                    if inspect.iscoroutinefunction(fn):
                        value = await fn(job)
                    else:
                        value = await loop.run_in_executor(pool, fn, job)
                    return _ok(i, d, value)
                except BaseException as e:  # a handler's error is the job's outcome
                    if isinstance(e, (KeyboardInterrupt, SystemExit)):
                        raise
                    return _outcome(i, e)

        async def batch(frame):
            outs = await asyncio.gather(*(one(i, d) for i, d in enumerate(frame["jobs"])))
            write({"type": "outcomes", "batch": frame["batch"], "outcomes": outs})

        tasks = set()
        while True:
            line = await reader.readline()
            if not line:
                break
            frame = json.loads(line)
            if frame.get("type") != "batch":
                continue
            t = asyncio.ensure_future(batch(frame))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        pool.shutdown(wait=True)
