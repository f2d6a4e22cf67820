"""Enqueue jobs into weir queues from Python: a thin wrapper over ``FCALL weir_enqueue``.

The contract (envelope, keys, arguments) is weir's protocol 1, stated in weir's
docs/protocol.md. The library must be loaded in Redis (``weir functions load``, or any
``weir work`` consumer at start); the first call checks that it speaks protocol 1.

Redis can lose the library (a restart without persistence, a failover, ``FUNCTION
FLUSH``); a running weir consumer loads it again within a second. A call that finds it
missing waits up to ``LIBRARY_WAIT`` seconds for that, then raises a WeirError that says
what to run.
"""

import asyncio
import itertools
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Iterable, List, Optional, Union

__all__ = ["Producer", "AsyncProducer", "Job", "BulkReport", "Outcome", "WeirError", "queue_keys",
           "PROTOCOL", "ENQUEUED", "DUPLICATE_ID", "UNIQUE_KEY_HELD"]

#: The protocol this package speaks (docs/protocol.md).
PROTOCOL = 1
#: Jobs per FCALL in ``enqueue_bulk``, and envelope bytes per call.
BULK_CHUNK = 1000
BULK_CHUNK_BYTES = 1 << 20
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_MAX_ENVELOPE_BYTES = 1 << 20
#: Seconds a call waits for a missing library to be loaded again (a running weir consumer
#: checks every second), and how often it looks meanwhile.
LIBRARY_WAIT = 5.0
LIBRARY_POLL = 0.1
_MISSING = ("the weir Functions library is not loaded in this Redis (a restart without "
            "persistence, a failover or FUNCTION FLUSH loses it, and no weir consumer "
            "loaded it again within %g s): run `weir functions load` against this Redis, "
            "or start a weir consumer" % LIBRARY_WAIT)

# The queue's keys, in the order weir_enqueue takes them (weir's src/queue/keys.rs).
KEY_SUFFIXES = (
    "ready:high", "ready:normal", "ready:low",
    "delayed:high", "delayed:normal", "delayed:low",
    "jobs", "lease", "dead", "errors", "paused", "counters", "wake",
    "started", "suspects", "deferrals", "lease_tokens", "settings", "unique:",
)
#: The queue registry (weir's keys.rs QUEUES): weir_enqueue takes it after the queue's keys.
QUEUES = "weir:queues"
PRIORITIES = {"high": 0, "normal": 1, "low": 2}
_TOKEN = re.compile(r"[A-Za-z0-9_.:-]{1,128}\Z")
Duration = Union[int, float, timedelta]
When = Union[int, float, datetime]


class WeirError(Exception):
    """A job weir would refuse, or a Redis without a usable weir library."""


def queue_keys(queue: str) -> List[str]:
    """The keys of ``queue``, in the order weir_enqueue takes them."""
    _token("queue name", queue)
    return ["weir:{%s}:%s" % (queue, s) for s in KEY_SUFFIXES]


def _token(what: str, value: str) -> str:
    if not isinstance(value, str) or not _TOKEN.match(value):
        raise WeirError(f"invalid {what} {value!r}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -")
    return value


_RETRY_DURATION = re.compile(r"^(?:[0-9]+[a-zµ]+)+$")


def _retry_rule(spec: str) -> str:
    """Checks a retry rule as weir reads it (``sidekiq``, ``exp:base=1s,factor=2,cap=1h,
    jitter=0.5``, ``fixed:10s,1m``, each with an optional ``,attempts=N``)."""
    def bad(why: str) -> WeirError:
        return WeirError(f"invalid retry rule {spec!r}: {why}")
    if not isinstance(spec, str) or len(spec) > 1024:
        raise bad("expected a string of at most 1024 characters")
    name, _, rest = spec.strip().partition(":")
    parts, attempts = [], None
    for p in (p.strip() for p in rest.split(",")):
        if not p:
            continue
        if p.startswith("attempts="):
            if not p[9:].isdigit() or int(p[9:]) < 1:
                raise bad("attempts must be a whole number of at least 1")
            attempts = p
        else:
            parts.append(p)
    if name == "sidekiq" and not parts:
        pass
    elif name == "fixed" and 1 <= len(parts) <= 100:
        for p in parts:
            if not _RETRY_DURATION.match(p):
                raise bad(f"{p!r} is not a duration (10s, 1m, 1h30m)")
    elif name == "exp":
        for p in parts:
            k, _, v = p.partition("=")
            if k in ("base", "cap") and _RETRY_DURATION.match(v):
                continue
            try:
                x = float(v)
            except ValueError:
                x = None
            if k == "factor" and x is not None and 1 <= x <= 100:
                continue
            if k == "jitter" and x is not None and 0 <= x <= 1:
                continue
            raise bad(f"{p!r}: expected base=DURATION, cap=DURATION, factor=1..100 or jitter=0..1")
    else:
        raise bad("expected sidekiq, exp:base=1s,factor=2,cap=1h,jitter=0.5 or fixed:10s,1m "
                  "(each may add ,attempts=N)")
    return name + ":" + ",".join(parts + ([attempts] if attempts else []))


def _ms(what: str, d: Optional[Duration]) -> int:
    if d is None:
        return 0
    secs = d.total_seconds() if isinstance(d, timedelta) else float(d)
    if secs < 0:
        raise WeirError(f"{what} must not be negative")
    return int(secs * 1000)


_PREFIX = secrets.token_hex(8)
_NEXT = itertools.count()


def _new_id() -> str:
    return "%s-%x" % (_PREFIX, next(_NEXT))


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _time_id(now_ms: int) -> Optional[str]:
    """A time id: the enqueue time as 8 base-36 digits, ".", then a fresh id; None past
    the digits' range (weir reads the time back from a compact envelope's id)."""
    if not 0 <= now_ms < 36 ** 8:
        return None
    digits = []
    for _ in range(8):
        now_ms, d = divmod(now_ms, 36)
        digits.append(_BASE36[d])
    return "".join(reversed(digits)) + "." + _new_id()


@dataclass
class Job:
    """One job for ``Producer.enqueue_bulk``; the options are those of ``enqueue``."""

    kind: str
    payload: Any = None
    payload_json: Optional[str] = None
    id: Optional[str] = None
    priority: str = "normal"
    delay: Optional[Duration] = None
    run_at: Optional[When] = None
    max_attempts: Optional[int] = None
    trace_id: Optional[str] = None
    unique_for: Optional[Duration] = None
    unique_key: Optional[str] = None
    key: Optional[str] = None
    retry: Optional[str] = None


@dataclass
class BulkReport:
    """What ``enqueue_bulk`` did: jobs stored, and the ids skipped as duplicates."""

    enqueued: int = 0
    duplicates: List[str] = field(default_factory=list)


#: ``Outcome.status``: the job was stored; a job with its (chosen) id exists; its unique key
#: is held by a job enqueued within the window.
ENQUEUED, DUPLICATE_ID, UNIQUE_KEY_HELD = "enqueued", "duplicate_id", "unique_key_held"


@dataclass
class Outcome:
    """What ``enqueue_outcome`` did with one job: its id and ENQUEUED, DUPLICATE_ID or
    UNIQUE_KEY_HELD."""

    id: str
    status: str

    @property
    def enqueued(self) -> bool:
        return self.status == ENQUEUED


@dataclass
class _Prepared:
    id: str
    section: tuple  # priority, delay ms, run_at ms, id chosen (0/1), unique_for ms
    envelope: bytes


class Producer:
    """Enqueues jobs into one weir queue over a redis-py client (``redis.Redis``)."""

    def __init__(self, redis, queue: str, *, default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 max_envelope_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES, compact_envelopes: bool = False):
        """``compact_envelopes``: write a fresh job with a generated id, 5 attempts and
        normal priority as weir's compact envelope (61 bytes fewer; docs/protocol.md). Only
        for queues whose consumers all read it (weir releases from the compact form on)."""
        self.redis = redis
        self.queue = queue
        self.keys = queue_keys(queue) + [QUEUES]
        self.default_max_attempts = max(1, default_max_attempts)
        self.max_envelope_bytes = max_envelope_bytes
        self.compact_envelopes = compact_envelopes
        self._checked = False

    def enqueue(self, kind: str, payload: Any = None, **options) -> Optional[str]:
        """Enqueues one job; returns its id, or None if it was skipped as a duplicate
        (``enqueue_outcome`` says which kind)."""
        outcome = self.enqueue_outcome(kind, payload, **options)
        return outcome.id if outcome.enqueued else None

    def enqueue_outcome(self, kind: str, payload: Any = None, **options) -> Outcome:
        """Enqueues one job; says whether it was stored, or refused because its id is
        taken or because its unique key is held."""
        job = self._prepare(Job(kind, payload, **options), _now_ms())
        if not self._call([job]):
            return Outcome(job.id, ENQUEUED)
        taken = _id_taken(job)
        if taken is None:
            taken = bool(self.redis.hexists(self.keys[6], job.id))
        return Outcome(job.id, DUPLICATE_ID if taken else UNIQUE_KEY_HELD)

    def enqueue_in(self, delay: Duration, kind: str, payload: Any = None, **options) -> Optional[str]:
        """Enqueues one job to run after ``delay`` (seconds or a timedelta)."""
        return self.enqueue(kind, payload, delay=delay, **options)

    def enqueue_at(self, when: When, kind: str, payload: Any = None, **options) -> Optional[str]:
        """Enqueues one job to run at ``when`` (epoch seconds or a datetime)."""
        return self.enqueue(kind, payload, run_at=when, **options)

    def enqueue_bulk(self, jobs: Iterable[Job]) -> BulkReport:
        """Enqueues many jobs, up to BULK_CHUNK per call. Every job is checked before
        anything is sent: a bad one raises WeirError with nothing enqueued."""
        report = BulkReport()
        for chunk in self._chunks(jobs):
            dups = self._call(chunk)
            report.enqueued += len(chunk) - len(dups)
            report.duplicates.extend(dups)
        return report

    def _chunks(self, jobs: Iterable[Job]) -> List[List[_Prepared]]:
        """The jobs prepared (all checked first), in chunks of one call each."""
        now = _now_ms()
        prepared = [self._prepare(j, now) for j in jobs]
        chunks, chunk, size = [], [], 0
        for p in prepared:
            if len(chunk) == BULK_CHUNK or size >= BULK_CHUNK_BYTES:
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(p)
            size += len(p.envelope)
        return chunks + [chunk] if chunk else chunks

    def check_library(self) -> None:
        """Checks that Redis has a weir library of this package's protocol (done once,
        before the first enqueue)."""
        self._check_version(self._when_loaded(lambda: self.redis.fcall_ro("weir_version", 0)))

    def _check_version(self, reply) -> None:
        protocol, version, _build = reply
        if int(protocol) != PROTOCOL:
            version = version.decode() if isinstance(version, bytes) else version
            raise WeirError(f"the weir library in Redis speaks protocol {protocol} (weir {version}); "
                            f"this package speaks protocol {PROTOCOL}")
        self._checked = True

    def _call(self, jobs: List[_Prepared]) -> List[str]:
        if not self._checked:
            self.check_library()
        args = _args(jobs)
        return _ids(self._when_loaded(lambda: self.redis.fcall("weir_enqueue", len(self.keys), *self.keys, *args)))

    def _when_loaded(self, call):
        """Runs ``call`` (an FCALL); while Redis answers that the function is not found
        (nothing ran), tries again for up to LIBRARY_WAIT seconds, then raises WeirError."""
        import redis as redis_py

        deadline = time.monotonic() + LIBRARY_WAIT
        while True:
            try:
                return call()
            except redis_py.ResponseError as e:
                if "Function not found" not in str(e):
                    raise
                if time.monotonic() >= deadline:
                    raise WeirError(_MISSING) from e
            time.sleep(LIBRARY_POLL)

    def _prepare(self, job: Job, now_ms: int) -> _Prepared:
        _token("job kind", job.kind)
        chosen = job.id is not None
        time_id = None if chosen or not self.compact_envelopes else _time_id(now_ms)
        job_id = _token("job id", job.id) if chosen else time_id or _new_id()
        if job.priority not in PRIORITIES:
            raise WeirError(f"unknown priority {job.priority!r}: use high, normal or low")
        priority = PRIORITIES[job.priority]
        # 0 is one run, as the Rust producer takes it; only None means the default
        max_attempts = max(1, self.default_max_attempts if job.max_attempts is None else job.max_attempts)
        window = _ms("unique_for", job.unique_for)
        if time_id is not None and max_attempts == 5 and priority == 1:
            # the compact form: attempt 0, 5 attempts, normal priority, its id's time
            head = '{"id":"%s","kind":"%s"' % (job_id, job.kind)
        else:
            head = '{"attempt":0,"max_attempts":%d,"priority":%d,"enqueued_at":%d,"id":"%s","kind":"%s"' % (
                max_attempts, priority, now_ms, job_id, job.kind)
        if job.trace_id is not None:
            head += ',"trace_id":"%s"' % _token("trace id", job.trace_id)
        if window > 0:
            key = job_id if job.unique_key is None else _token("unique key", job.unique_key)
            head += ',"unique_key":"%s"' % key
        if job.key is not None:
            # the job's key for per-key limits: after unique_key, before payload
            head += ',"key":"%s"' % _token("job key", job.key)
        if job.retry is not None:
            # the job's own retry rule: after key, before payload; wins over the rules of
            # its kind and queue
            head += ',"retry":"%s"' % _retry_rule(job.retry)
        envelope = (head + ',"payload":' + _payload_json(job) + "}").encode()
        if len(envelope) > self.max_envelope_bytes:
            raise WeirError(f"job {job_id!r} is {len(envelope)} bytes, over the limit of "
                            f"{self.max_envelope_bytes} bytes")
        section = (priority, _ms("delay", job.delay), _run_at_ms(job.run_at), int(chosen), window)
        return _Prepared(job_id, section, envelope)


class AsyncProducer(Producer):
    """``Producer`` over a ``redis.asyncio`` client: the same methods, awaited."""

    async def enqueue(self, kind: str, payload: Any = None, **options) -> Optional[str]:
        """Enqueues one job; returns its id, or None if it was skipped as a duplicate."""
        outcome = await self.enqueue_outcome(kind, payload, **options)
        return outcome.id if outcome.enqueued else None

    async def enqueue_outcome(self, kind: str, payload: Any = None, **options) -> Outcome:
        """Enqueues one job; says whether it was stored, or why not (``Outcome``)."""
        job = self._prepare(Job(kind, payload, **options), _now_ms())
        if not await self._call([job]):
            return Outcome(job.id, ENQUEUED)
        taken = _id_taken(job)
        if taken is None:
            taken = bool(await self.redis.hexists(self.keys[6], job.id))
        return Outcome(job.id, DUPLICATE_ID if taken else UNIQUE_KEY_HELD)

    async def enqueue_in(self, delay: Duration, kind: str, payload: Any = None, **options) -> Optional[str]:
        """Enqueues one job to run after ``delay`` (seconds or a timedelta)."""
        return await self.enqueue(kind, payload, delay=delay, **options)

    async def enqueue_at(self, when: When, kind: str, payload: Any = None, **options) -> Optional[str]:
        """Enqueues one job to run at ``when`` (epoch seconds or a datetime)."""
        return await self.enqueue(kind, payload, run_at=when, **options)

    async def enqueue_bulk(self, jobs: Iterable[Job]) -> BulkReport:
        """Enqueues many jobs, as ``Producer.enqueue_bulk``."""
        report = BulkReport()
        for chunk in self._chunks(jobs):
            dups = await self._call(chunk)
            report.enqueued += len(chunk) - len(dups)
            report.duplicates.extend(dups)
        return report

    async def check_library(self) -> None:
        """Checks that Redis has a weir library of this package's protocol."""
        self._check_version(await self._when_loaded(lambda: self.redis.fcall_ro("weir_version", 0)))

    async def _call(self, jobs: List[_Prepared]) -> List[str]:
        if not self._checked:
            await self.check_library()
        args = _args(jobs)
        return _ids(await self._when_loaded(
            lambda: self.redis.fcall("weir_enqueue", len(self.keys), *self.keys, *args)))

    async def _when_loaded(self, call):
        import redis as redis_py

        deadline = time.monotonic() + LIBRARY_WAIT
        while True:
            try:
                return await call()
            except redis_py.ResponseError as e:
                if "Function not found" not in str(e):
                    raise
                if time.monotonic() >= deadline:
                    raise WeirError(_MISSING) from e
            await asyncio.sleep(LIBRARY_POLL)


def _args(jobs: List[_Prepared]) -> list:
    """weir_enqueue's arguments: consecutive jobs that share options as one section."""
    args: list = []
    for section, group in itertools.groupby(jobs, key=lambda j: j.section):
        group = list(group)
        args.extend(section)
        args.append(len(group))
        for j in group:
            args.append(j.id)
            args.append(j.envelope)
    return args


def _ids(reply) -> List[str]:
    return [d.decode() if isinstance(d, bytes) else d for d in reply]


def _id_taken(job: _Prepared) -> Optional[bool]:
    """Why a refused job was refused, when its options say: True (its chosen id is taken:
    the script checks the id first), False (a generated id: its unique key is held), or
    None (a chosen id with a window: look for the id)."""
    chosen, window = job.section[3], job.section[4]
    if not chosen:
        return False
    return True if not window else None


def _payload_json(job: Job) -> str:
    if job.payload_json is not None:
        try:
            json.loads(job.payload_json)
        except ValueError as e:
            raise WeirError(f"payload_json is not JSON: {e}") from None
        return job.payload_json
    try:
        return json.dumps(job.payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise WeirError(f"cannot encode payload: {e}") from None


def _run_at_ms(when: Optional[When]) -> int:
    if when is None:
        return 0
    secs = when.timestamp() if isinstance(when, datetime) else float(when)
    return max(1, int(secs * 1000))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
