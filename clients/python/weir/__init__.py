"""weir from Python: a worker on weir's Rust engine, and the producer.

    import weir

    worker = weir.Worker("redis://127.0.0.1:6379", queue="emails", concurrency=64)

    @worker.handler("send_email")
    async def send_email(job):          # job.id, job.kind, job.payload, job.attempt, job.key
        ...

    @worker.handler("resize")
    def resize(job):                    # plain functions run on a thread pool
        ...

    worker.run()                        # SIGINT/SIGTERM: graceful, as `weir work`

Fetching, leases, acks and the limiter run in Rust threads; only handler calls take the
GIL. Async handlers run on one asyncio loop in a thread of its own.
"""

import json
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from weir_producer import (PROTOCOL, BulkReport, Producer, WeirError, queue_keys)
from weir_producer import Job as NewJob

from ._weir import Engine as _Engine
from ._weir import Job
from ._loop import Loop as _Loop

__all__ = ["Worker", "Job", "Retry", "Backpressure", "Fatal", "Producer", "NewJob",
           "BulkReport", "WeirError", "queue_keys", "PROTOCOL"]


class Retry(Exception):
    """Retry the job, no sooner than ``after`` seconds (else the queue's backoff); charges
    an attempt, as any other exception does."""

    def __init__(self, message: str = "retry", after: Optional[float] = None):
        super().__init__(message)
        self.after = after


class Backpressure(Exception):
    """The downstream is overloaded: put the job back without charging an attempt, to run
    again after ``after`` seconds (or the backoff), and let the adaptive limiter slow down."""

    def __init__(self, message: str = "backpressure", after: Optional[float] = None):
        super().__init__(message)
        self.after = after


class Fatal(Exception):
    """No retry will cure this: the job goes to the dead-letter queue now."""


def _outcome(exc: BaseException) -> Tuple[int, str, Optional[float]]:
    """The engine's outcome tuple for a handler's exception (codes: native/src/job.rs)."""
    if isinstance(exc, Fatal):
        return (3, str(exc) or "fatal", None)
    if isinstance(exc, Backpressure):
        return (2, str(exc), _seconds(exc.after))
    if isinstance(exc, Retry):
        return (1, str(exc), _seconds(exc.after))
    return (0, "%s: %s" % (type(exc).__name__, exc), None)


def _seconds(after: Any) -> Optional[float]:
    if after is None:
        return None
    if hasattr(after, "total_seconds"):
        return float(after.total_seconds())
    return float(after)


def _result(job: Job, value: Any) -> Optional[str]:
    """A handler's return value as the engine takes it: None, or its JSON text when the
    job keeps it (its queue keeps completed jobs; else nothing is encoded). What JSON
    cannot encode is kept by its ``str()``; the engine keeps at most 4096 bytes."""
    if value is None or not job.keeps_result:
        return None
    try:
        return json.dumps(value, default=str)
    except (ValueError, RecursionError):  # a value that holds itself
        return json.dumps(str(value))


def _call_sync(function: Callable, job: Job):
    """Runs a plain handler (on one of the engine's threads): None, the result's JSON
    text (``_result``), or an outcome tuple."""
    try:
        value = function(job)
    except Exception as e:  # any exception is the job's outcome, never the engine's
        return _outcome(e)
    return _result(job, value)


Queues = Union[str, Iterable[Union[str, Tuple[str, int]]]]


class Worker:
    """Drains weir queues with Python handlers, on weir's engine.

    ``queue`` is a name, or several: names or ``(name, weight)`` pairs (``emails:3`` works
    too), fetched under one concurrency budget in proportion to their weights.
    The keyword arguments are ``weir work``'s options:

    - ``concurrency``: jobs running at once (with ``adaptive``, where the limit starts);
    - ``adaptive``: AIMD limit between ``min_concurrency`` and ``max_concurrency``, holding
      ``target_p95`` ("200ms" or "1.5x");
    - ``rate`` ("500/s", "30/m") with ``burst``;
    - ``visibility_timeout``: the lease, seconds (a job not settled by then runs elsewhere);
    - ``job_timeout``: seconds a handler may run before the job counts as failed;
    - ``shutdown_timeout``: seconds running jobs get to finish at SIGINT/SIGTERM;
    - ``drain``: return once nothing is ready, delayed or running;
    - ``metrics_addr``: serve Prometheus metrics there ("127.0.0.1:9464");
    - ``batch``: jobs per fetch;
    - ``loop_factory``: makes the event loop the async handlers run on (default
      ``asyncio.new_event_loop``; ``uvloop.new_event_loop`` for uvloop), as
      ``asyncio.run``'s ``loop_factory``;
    - ``run_ahead``: async jobs the loop holds beyond ``concurrency``, so that a handler
      that returns is followed at once by the next job (default: what the slots finish
      in about 2 ms at the handlers' mean duration, at most a quarter of them: none
      when that is less than one job; 0: none). A held job is leased, and its start is
      marked when it starts: a worker that dies while holding it sends it back as a job
      that never ran. Only with a fixed concurrency on one queue and no ``job_timeout``
      (else jobs start as the engine hands them over).
    """

    def __init__(self, url: str = "redis://127.0.0.1:6379", queue: Queues = "default", *,
                 concurrency: int = 64, adaptive: bool = False,
                 min_concurrency: Optional[int] = None, max_concurrency: Optional[int] = None,
                 target_p95: Optional[str] = None, rate: Optional[str] = None,
                 burst: Optional[int] = None, visibility_timeout: float = 30.0,
                 job_timeout: Optional[float] = None, shutdown_timeout: float = 30.0,
                 drain: bool = False, metrics_addr: Optional[str] = None,
                 batch: Optional[int] = None,
                 loop_factory: Optional[Callable[[], Any]] = None,
                 run_ahead: Optional[int] = None):
        self._engine = _Engine(url, _queues(queue), concurrency=concurrency, adaptive=adaptive,
                               min_concurrency=min_concurrency, max_concurrency=max_concurrency,
                               target_p95=target_p95, rate=rate, burst=burst,
                               visibility_timeout=float(visibility_timeout),
                               job_timeout=None if job_timeout is None else float(job_timeout),
                               shutdown_timeout=float(shutdown_timeout), drain=drain,
                               metrics_addr=metrics_addr, batch=batch)
        self._async: Dict[str, Callable] = {}
        self._sync: Dict[str, Callable] = {}
        self._loop_factory = loop_factory
        if run_ahead is not None and (not isinstance(run_ahead, int) or run_ahead < 0):
            raise ValueError("run_ahead must be a whole number >= 0, not %r" % (run_ahead,))
        if run_ahead and job_timeout is not None:
            raise ValueError("run_ahead cannot go with job_timeout: a held job's wait "
                             "would count against its timeout")
        queues = _queues(queue)
        # The loop keeps to the concurrency itself only when it is fixed and one queue's;
        # it holds jobs ahead only without a job timeout.
        self._slots = concurrency if not adaptive and len(queues) == 1 else None
        if run_ahead and self._slots is None:
            raise ValueError("run_ahead needs a fixed concurrency on one queue (not adaptive, "
                             "not several queues)")
        self._run_ahead = 0 if job_timeout is not None else run_ahead

    def handler(self, kind: str) -> Callable[[Callable], Callable]:
        """Registers the decorated function for jobs of ``kind``: a coroutine function runs
        on the worker's asyncio loop, a plain function on a thread pool."""
        def register(function: Callable) -> Callable:
            self.register(kind, function)
            return function
        return register

    def register(self, kind: str, function: Callable) -> None:
        """Registers ``function`` for jobs of ``kind`` (what ``handler`` does)."""
        if kind in self._async or kind in self._sync:
            raise ValueError("a handler for %r is already registered" % kind)
        import inspect
        if inspect.iscoroutinefunction(function):
            self._async[kind] = function
        else:
            self._sync[kind] = function

    def run(self) -> List[Tuple[str, int, int, int, int]]:
        """Runs until SIGINT/SIGTERM or ``stop()`` (graceful: running jobs finish), or
        until drained with ``drain=True``. Returns per queue (queue, acked, retried,
        deferred, dead)."""
        if not self._async and not self._sync:
            raise ValueError("no handler registered")
        loop = (_Loop(self._engine, self._async, self._loop_factory, self._slots, self._run_ahead)
                if self._async else None)
        import signal
        import threading
        main = threading.current_thread() is threading.main_thread()
        # The engine watches SIGINT and SIGTERM itself; Python's handlers only must not
        # raise KeyboardInterrupt once run() returns.
        saved = {}
        if main:
            for s in (signal.SIGINT, signal.SIGTERM):
                saved[s] = signal.signal(s, lambda *_: None)
        try:
            return self._engine.run(list(self._async), loop.wake_fd if loop else None,
                                    list(self._sync.items()), _call_sync, signals=main)
        except ValueError as e:
            raise WeirError(str(e)) from None
        finally:
            if loop:
                loop.close()
            for s, h in saved.items():
                signal.signal(s, h)

    def stop(self) -> None:
        """Stops ``run()`` gracefully (from a handler or any thread)."""
        self._engine.stop()


def _queues(queue: Queues) -> List[Tuple[str, int]]:
    names = [queue] if isinstance(queue, str) else list(queue)
    out = []
    for q in names:
        if isinstance(q, (tuple, list)):
            out.append((q[0], int(q[1])))
        elif ":" in q:
            name, weight = q.rsplit(":", 1)
            out.append((name, int(weight)))
        else:
            out.append((q, 1))
    return out
