"""The asyncio loop of a worker's async handlers, in a thread of its own."""

import asyncio
import os
import sys
import threading


if sys.version_info >= (3, 12):
    def _start(coro, loop):
        """Runs the handler up to its first suspension now, not a loop pass later."""
        return asyncio.Task(coro, loop=loop, eager_start=True)
else:
    def _start(coro, loop):
        return loop.create_task(coro)


class Loop:
    """Runs the async handlers: the engine writes a byte to ``wake_fd`` when jobs wait,
    and the loop takes them all (``engine.take()``) and starts one task per job."""

    def __init__(self, engine, handlers, loop_factory=None):
        from . import _outcome, _result
        self._engine = engine
        self._handlers = handlers
        self._outcome = _outcome
        self._result = _result
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

    def _wake(self):
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass
        loop, start, tasks = self.loop, _start, self._tasks
        for job, done in self._engine.take():
            task = start(self._run(job, done), loop)
            if not task.done():
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    async def _run(self, job, done):
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
