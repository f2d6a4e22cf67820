"""The asyncio loop of a worker's async handlers, in a thread of its own."""

import asyncio
import collections
import os
import sys
import threading
import time


if sys.version_info >= (3, 12):
    def _start(coro, loop):
        """Runs the handler up to its first suspension now, not a loop pass later."""
        return asyncio.Task(coro, loop=loop, eager_start=True)
else:
    def _start(coro, loop):
        return loop.create_task(coro)


# Jobs held beyond the slots, from the handlers' mean duration: what the slots finish
# while the engine answers one outcome with the next job (about a millisecond here,
# twice that for margin), so that a slot that frees starts a held job at once. Jobs
# longer than that get none held: a consumer with free slots runs them sooner.
HAND_OFF = 0.002
# At most this share of the slots is held ahead.
MAX_AHEAD = 4
# The mean is looked at again after this many jobs.
EVERY = 64


class Loop:
    """Runs the async handlers: the engine writes a byte to ``wake_fd`` when jobs wait,
    and the loop takes them all (``engine.take()``).

    With ``slots`` (a fixed concurrency on one queue), at most that many handlers run at
    once, each slot a task that runs jobs one after another, and the loop holds a few
    jobs beyond them (``run_ahead``; by default from the handlers' durations), handed
    over by the engine ahead of time: a slot that frees starts the next job in the same
    pass, not after the engine has answered. A held job's start is marked when it starts
    (``done.start()``), so a worker that dies sends the jobs it held back as jobs that
    never ran; a graceful shutdown runs them, and one past its timeout releases those
    not started. Without
    ``slots`` (an adaptive limit, several queues) each job starts at once in a task of
    its own, the engine's limit bounding them."""

    def __init__(self, engine, handlers, loop_factory=None, slots=None, run_ahead=None):
        from . import _outcome, _result
        self._engine = engine
        self._handlers = handlers
        self._outcome = _outcome
        self._result = _result
        self._slots = slots
        self._running = 0
        self._waiting = collections.deque()
        self._fixed = run_ahead
        self._want = run_ahead or 0
        self._held = 0
        self._mean = 0.0
        self._timed_jobs = 0
        self._read, self.wake_fd = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self.wake_fd, False)
        self.loop = (loop_factory or asyncio.new_event_loop)()
        self._tasks = set()
        started = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(started,),
                                        name="weir-asyncio", daemon=True)
        self._thread.start()
        started.wait()

    def _main(self, started):
        asyncio.set_event_loop(self.loop)
        self.loop.add_reader(self._read, self._wake)
        self.loop.call_soon(started.set)
        self.loop.run_forever()

    def _spawn(self, coro):
        task = _start(coro, self.loop)
        if not task.done():
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _wake(self):
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass
        if self._want != self._held and self._engine.hold(self._want):
            self._held = self._want
        slots, waiting = self._slots, self._waiting
        for job, done, holdable in self._engine.take():
            if holdable and slots is not None:
                waiting.append((job, done))
            else:  # a suspect runs at once (alone, the engine sees to that)
                self._spawn(self._run(job, done))
        self._fill()

    def _fill(self):
        """Starts slots while jobs wait and slots are free."""
        if self._slots is None:
            return
        while self._waiting and self._running < self._slots:
            self._running += 1
            self._spawn(self._slot())

    async def _slot(self):
        waiting, handlers, clock = self._waiting, self._handlers, time.monotonic
        try:
            while waiting:
                job, done = waiting.popleft()
                if not done.start():
                    continue  # let go by the engine while held
                t = clock()
                try:
                    value = await handlers[job.kind](job)
                except Exception as e:  # the job's outcome, never the loop's
                    done(self._outcome(e))
                else:
                    done(self._result(job, value))
                self._timed(clock() - t)
        finally:
            self._running -= 1
            self._fill()

    def _timed(self, took):
        """Keeps the handlers' mean duration, and from it the jobs to hold ahead."""
        self._timed_jobs += 1
        self._mean += (took - self._mean) / min(self._timed_jobs, EVERY)
        if self._fixed is None and self._timed_jobs % EVERY == 0:
            ahead = int(self._slots * HAND_OFF / self._mean) if self._mean > 0 else self._slots
            self._want = min(ahead, self._slots // MAX_AHEAD)

    async def _run(self, job, done):
        if not done.start():
            return
        try:
            value = await self._handlers[job.kind](job)
        except Exception as e:  # the job's outcome, never the loop's
            done(self._outcome(e))
        else:
            done(self._result(job, value))

    def close(self):
        """Stops the loop once the engine has returned (its jobs are settled by then)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.remove_reader(self._read)
        self.loop.close()
        os.close(self._read)
        os.close(self.wake_fd)
