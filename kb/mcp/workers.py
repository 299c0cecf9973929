"""Tool calls off the event loop, each with a time budget.

A tool is plain blocking Python (a 300 KB scan takes seconds); run on the loop's thread
it would hold up every other request, a ``search`` behind a ``scan`` included.  Calls
go to a small pool of long-lived daemon threads instead, each keeping its own warm
records and index (:mod:`kb.mcp.state`), and the loop only waits for the answer.

A call that is still running when its budget runs out is abandoned: the caller gets an
error saying so at once, the thread finishes (or not) on its own and is then reused.
Python cannot stop a thread, so a pool that is all busy grows by one thread, up to
:data:`MOST`; past that, calls queue and their budget keeps running while they wait.
The threads are daemons: a call that never ends does not keep the server alive after
the client has gone.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

#: Seconds one tool call may take (``kb mcp --time-budget``).
DEFAULT_BUDGET = 60.0
#: The most worker threads; more only when calls were abandoned still running.
MOST = 16


class OverBudget(Exception):
    """A call that did not finish within its budget."""

    def __init__(self, budget: float) -> None:
        super().__init__(
            f"the call did not finish within the {budget:g} s time budget and "
            "was abandoned; ask for less (a smaller text, file or directory)"
        )
        self.budget = budget


class Workers:
    """Daemon threads taking calls from one queue; a new one starts when none is idle."""

    def __init__(self, most: int = MOST) -> None:
        self.most = most
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads waiting for a call that no queued call is promised to
        self._waiting = 0  # calls queued while every thread was busy

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._idle > 0:
                self._idle -= 1  # an idle thread takes it
            elif self._threads < self.most:
                self._threads += 1
                threading.Thread(
                    target=self._work, name=f"kb-tool-{self._threads}", daemon=True
                ).start()
            else:
                self._waiting += 1  # the next thread to finish takes it
        self._jobs.put((future, fn))
        return future

    def _work(self) -> None:
        while True:
            future, fn = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)
            with self._lock:
                if self._waiting > 0:
                    self._waiting -= 1
                else:
                    self._idle += 1

    async def run(self, fn: Callable[[], Any], budget: float) -> Any:
        """``fn()`` on a worker; OverBudget when it takes longer than ``budget`` seconds."""
        future = self.submit(fn)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), budget)
        except asyncio.TimeoutError:
            raise OverBudget(budget) from None
        finally:
            future.cancel()  # a no-op once it runs; a call still queued never starts


_POOL: Workers | None = None
_BUDGET = DEFAULT_BUDGET


def configure(budget: float) -> None:
    """Set the time budget of every later call (seconds, > 0)."""
    global _BUDGET
    _BUDGET = budget


def budget() -> float:
    return _BUDGET


def pool() -> Workers:
    """The process's worker pool (created on first use)."""
    global _POOL
    if _POOL is None:
        _POOL = Workers()
    return _POOL
