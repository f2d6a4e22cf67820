"""The exec tests' worker on clients/python/weir_exec.py: what a job does is its payload's
`mode` (see tests/exec_handler.rs). Marks go to files in $WEIR_TEST_DIR."""
import asyncio, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../clients/python"))
from weir_exec import Worker, Retry, Fatal, Backpressure  # noqa: E402

DIR = os.environ["WEIR_TEST_DIR"]
open(os.path.join(DIR, "pid-%d" % os.getpid()), "w").close()
worker = Worker(concurrency=int(os.environ.get("WEIR_TEST_CONCURRENCY", "16")))


def first_time(job):
    """True the first time this job id runs (a mark file), false after."""
    try:
        open(os.path.join(DIR, "seen-" + job.id), "x").close()
        return True
    except FileExistsError:
        return False


@worker.handle("t")
async def t(job):
    mode = job.payload["mode"]
    if job.payload.get("sleep_ms"):
        open(os.path.join(DIR, "started-" + job.id), "w").close()
        await asyncio.sleep(job.payload["sleep_ms"] / 1000)
    if mode == "retry_once" and job.attempt == 0:
        raise Retry("asked to retry", after=0.05)
    if mode == "raise_once" and job.attempt == 0:
        raise ValueError("boom")
    if mode == "defer_once" and first_time(job):
        raise Backpressure("busy", after=0.05)
    if mode == "fatal":
        raise Fatal("bad row " + job.id)
    open(os.path.join(DIR, "done-" + job.id), "w").close()
    return {"id": job.id, "attempt": job.attempt}


@worker.handle("sync")
def sync(job):
    time.sleep(0.001)
    open(os.path.join(DIR, "done-" + job.id), "w").close()
    return ["sync", job.id]


worker.run()
print("worker exiting", file=sys.stderr)
