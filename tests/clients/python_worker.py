"""A weir.Worker for tests/python_worker.rs. argv[1]: JSON settings (url, queues, log,
and Worker keyword arguments). Kinds "async" (a coroutine function) and "sync" (a plain
function) both act on the payload's "do":

  ok            return
  sleep         sleep payload["s"] seconds, then return
  raise         raise ValueError on the first run (attempt 0), return after
  retry_after   raise weir.Retry(after=payload["s"]) on attempt 0, return after
  backpressure  raise weir.Backpressure(after=payload["s"]) on this process's first run
  fatal         raise weir.Fatal
  barrier       wait (10 s at most) until payload["n"] runs wait together: fails unless
                that many run at once

Every run writes "start <id> <kind> <attempt> <unix time>" to the log before acting and
"end <id>" once it returned; run()'s report goes to stdout as JSON. A run that returns
returns {"id": id, "attempt": attempt} (its result, kept while the queue keeps completed
jobs), but for "none" (None) and "set" (a set, which JSON cannot encode).

With the setting "loop": "recording", async handlers run on a loop of this file's
RecordingLoop class (the `loop_factory` keyword). Every async run writes
"loop <id> <class of its running loop>". The setting "sleep_scale" multiplies every
sleep (0: none).
"""

import asyncio
import json
import sys
import threading
import time

import weir

settings = json.loads(sys.argv[1])
log = open(settings.pop("log"), "a", buffering=1)
lock = threading.Lock()
deferred = set()
barriers = {}


def write(line):
    with lock:
        log.write(line + "\n")


def act(job):
    """The outcome of this run, before its sleep: raises, or returns seconds to sleep."""
    p = job.payload
    write("start %s %s %d %.3f" % (job.id, job.kind, job.attempt, time.time()))
    do = p["do"]
    if do == "raise" and job.attempt == 0:
        raise ValueError("first run fails")
    if do == "retry_after" and job.attempt == 0:
        raise weir.Retry("later", after=p["s"])
    if do == "backpressure":
        with lock:
            first = job.id not in deferred
            deferred.add(job.id)
        if first:
            raise weir.Backpressure("slow down", after=p["s"])
    if do == "fatal":
        raise weir.Fatal("cannot be done")
    if do == "barrier":
        with lock:
            barrier = barriers.setdefault(p["n"], threading.Barrier(p["n"], timeout=10))
        if job.kind == "sync":
            barrier.wait()
    return p.get("s", 0) * sleep_scale if do == "sleep" else 0


def result(job):
    do = job.payload["do"]
    if do == "none":
        return None
    if do == "set":
        return {1, 2}
    return {"id": job.id, "attempt": job.attempt}


class RecordingLoop(asyncio.SelectorEventLoop):
    """A loop a test can recognize by its class."""


queues = settings.pop("queues")
sleep_scale = settings.pop("sleep_scale", 1)
if settings.pop("loop", None) == "recording":
    settings["loop_factory"] = RecordingLoop
worker = weir.Worker(settings.pop("url"), queues, **settings)


@worker.handler("async")
async def run_async(job):
    write("loop %s %s" % (job.id, type(asyncio.get_running_loop()).__name__))
    s = act(job)
    if s:
        await asyncio.sleep(s)
    write("end %s" % job.id)
    return result(job)


@worker.handler("sync")
def run_sync(job):
    s = act(job)
    if s:
        time.sleep(s)
    write("end %s" % job.id)
    return result(job)


print("ready", flush=True)
print(json.dumps(worker.run()), flush=True)
