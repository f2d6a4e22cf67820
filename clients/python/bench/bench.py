"""Speed of weir.Worker: the peer scenarios, on a Redis at REDIS_URL.

  S1: N no-op jobs enqueued (the producer's enqueue_bulk), then drained;
  S2: N jobs that sleep 10 ms, drained at concurrency 100 (ideal: 10,000 jobs/s).

With no SCENARIO, S2 also runs with no queue at all: 100 asyncio tasks (`bare-async`) and
100 threads (`bare-threads`) taking N 10 ms sleeps from a local queue, the ceiling that the
machine's timers leave each kind of handler (HANDLER=bare-async runs one alone).

    python clients/python/bench/bench.py                 # S1 100,000 and S2 20,000, async and sync
    SCENARIO=s1 HANDLER=async N=100000 python bench.py    # one run, as ../shared/peers/run.sh's
                                                          # CANDIDATE_CMD (see the README)

Each run prints `RESULT enqueue_jobs_per_s=.. drain_jobs_per_s=.. completed=..` (run.sh's
format) and the worker's CPU per job (engine and Python together: the handler-call cost).
Each run drains its own fresh queue; measure a release build (`maturin build --release`).
LOOP=uvloop runs the async handlers (and `bare-async`) on uvloop (`pip install uvloop`)
instead of asyncio's own loop.
"""

import asyncio
import os
import queue as local
import resource
import sys
import threading
import time

import redis

import weir


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def loop_factory():
    """The event loop LOOP names: asyncio's (unset or ``asyncio``) or uvloop's."""
    name = os.environ.get("LOOP", "asyncio")
    if name == "uvloop":
        import uvloop
        return uvloop.new_event_loop
    if name != "asyncio":
        sys.exit("LOOP is asyncio or uvloop, not %r" % name)
    return asyncio.new_event_loop


def bare(handler: str, n: int, concurrency: int) -> dict:
    """S2's sleeps with no queue: `concurrency` asyncio tasks or threads take n sleeps."""
    todo = local.SimpleQueue()
    for i in range(n):
        todo.put(i)

    def take() -> bool:
        try:
            todo.get_nowait()
            return True
        except local.Empty:
            return False

    async def task():
        while take():
            await asyncio.sleep(0.01)

    async def tasks():
        await asyncio.gather(*(task() for _ in range(concurrency)))

    def thread():
        while take():
            time.sleep(0.01)

    c0, t0 = cpu_s(), time.perf_counter()
    if handler == "bare-async":
        loop = loop_factory()()
        try:
            loop.run_until_complete(tasks())
        finally:
            loop.close()
    else:
        threads = [threading.Thread(target=thread) for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    t1, c1 = time.perf_counter(), cpu_s()
    return {"enqueue_jobs_per_s": 0.0, "drain_jobs_per_s": n / (t1 - t0),
            "cpu_us_per_job": (c1 - c0) / n * 1e6, "completed": n}


def run(url: str, queue: str, scenario: str, handler: str, n: int, concurrency: int) -> dict:
    if handler.startswith("bare-"):
        return bare(handler, n, concurrency)
    producer = weir.Producer(redis.Redis.from_url(url), queue)
    # A worker loads weir's Functions library (drain: returns at once on an empty queue).
    loader = weir.Worker(url, queue, drain=True)
    loader.register("bench", lambda job: None)
    loader.run()
    payloads = [{"n": i} for i in range(n)]
    t0 = time.perf_counter()
    for i in range(0, n, 10_000):
        producer.enqueue_bulk(weir.NewJob("bench", p) for p in payloads[i:i + 10_000])
    t1 = time.perf_counter()
    worker = weir.Worker(url, queue, concurrency=concurrency, drain=True,
                         loop_factory=loop_factory())
    sleep = scenario == "s2"
    if handler == "async":
        if sleep:
            async def bench(job):
                await asyncio.sleep(0.01)
        else:
            async def bench(job):
                pass
    else:
        if sleep:
            def bench(job):
                time.sleep(0.01)
        else:
            def bench(job):
                pass
    worker.register("bench", bench)
    c0, t2 = cpu_s(), time.perf_counter()
    report = worker.run()
    t3, c1 = time.perf_counter(), cpu_s()
    acked = sum(r[1] for r in report)
    return {
        "scenario": scenario, "handler": handler, "n": n, "concurrency": concurrency,
        "enqueue_jobs_per_s": n / (t1 - t0), "drain_jobs_per_s": n / (t3 - t2),
        "cpu_us_per_job": (c1 - c0) / n * 1e6, "completed": acked,
    }


def main() -> None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    base = os.environ.get("QUEUE", "bench-py")
    if "SCENARIO" in os.environ:
        scenario = os.environ["SCENARIO"]
        runs = [(scenario, os.environ.get("HANDLER", "async"),
                 int(os.environ.get("N", 100_000 if scenario == "s1" else 20_000)))]
    else:
        runs = [(s, h, 100_000 if s == "s1" else 20_000) for s in ("s1", "s2")
                for h in ("async", "sync")]
        runs += [("s2", h, 20_000) for h in ("bare-async", "bare-threads")]
    stamp = int(time.time())
    for i, (scenario, handler, n) in enumerate(runs):
        conc = int(os.environ.get("CONCURRENCY") or 0) or (256 if scenario == "s1" else 100)
        r = run(url, "%s-%d-%d" % (base, stamp, i), scenario, handler, n, conc)
        print("%s %-12s n=%d conc=%d: enqueue %.0f jobs/s, drain %.0f jobs/s, %.1f us CPU/job, "
              "completed %d" % (scenario, handler, n, conc, r["enqueue_jobs_per_s"],
                                r["drain_jobs_per_s"], r["cpu_us_per_job"], r["completed"]),
              file=sys.stderr)
        print("RESULT enqueue_jobs_per_s=%.1f drain_jobs_per_s=%.1f completed=%d cpu_us_per_job=%.1f"
              % (r["enqueue_jobs_per_s"], r["drain_jobs_per_s"], r["completed"], r["cpu_us_per_job"]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
