"""Long tool calls in child processes, each within a time and a memory budget.

Quick tools (a search, a record, a short candidate list) are answered on the server's
event loop: a thread or process hop would cost more than the answer.  A call that may
run long (a scan, a reference run, a large candidate list) goes to a child process
instead, so it never holds up the loop and can always be stopped:

- **Cancellation is a kill.**  When the budget runs out (or the client cancels), the
  child's process group is killed at once, the scan's own file readers with it, and its
  slot is free for the next call.  Python cannot stop a thread, and a cooperative flag
  would have to be polled inside every loop of the scanner, the planner and the numpy
  references (and still not reach a long ``ast.parse`` or numpy call); a process stops
  wherever it is, and what it allocated goes back to the system with it.
- **Memory is bounded.**  Each child may allocate ``--memory-budget`` MiB beyond what it
  starts with (``RLIMIT_DATA``); past that its allocations fail with MemoryError, which
  comes back as a tool error.  The server's own memory never grows with a call.
- **Children are cheap.**  They are forked from a fork server that imported the scanner
  and the references once (``multiprocessing``'s ``forkserver``), so a call pays a fork
  and a catalog open (a few tens of milliseconds), not an interpreter start.
- **Children die with the server.**  The fork server exits when the server does, and
  each child asks the kernel to kill it when the fork server goes (Linux).

At most :data:`MOST` children run at once; later calls queue, their budget running.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import sys
import weakref
from dataclasses import dataclass
from typing import Any

import anyio

from kb.mcp.child import Call, Job, run

#: Seconds one tool call may take (``kb mcp --time-budget``).
DEFAULT_BUDGET = 60.0
#: MiB one long call may allocate beyond its process's start (``kb mcp --memory-budget``).
DEFAULT_MEMORY_MIB = 2048
#: Long calls running at once; more wait for a slot.
MOST = 4
#: Modules the fork server imports once, so every child starts with them loaded.
PRELOAD = (
    "kb.mcp.child",
    "kb.api.scan",
    "kb.api.check",
    "kb.scan.engine",
    "kb.rules",
    "kb.reference",
    "kb.api.reference",
)
#: Thread pools of numeric libraries: one thread each in a child (the calls are small,
#: and a fork server with idle BLAS threads is not a safe thing to fork).
_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class OverBudget(Exception):
    """A call that did not finish within its budget."""

    def __init__(self, budget: float) -> None:
        super().__init__(
            f"the call did not finish within the {budget:g} s time budget and "
            "was stopped; ask for less (a smaller text, file or directory)"
        )
        self.budget = budget


class CallerError(Exception):
    """The child refused the arguments; the message says why."""


class CallFailed(Exception):
    """The child failed inside (a bug, or the process died); ``detail`` is for the log."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass
class Settings:
    budget: float = DEFAULT_BUDGET
    memory_mib: int = DEFAULT_MEMORY_MIB


_SETTINGS = Settings()


def configure(budget: float, memory_mib: int = DEFAULT_MEMORY_MIB) -> None:
    """Set the time budget (seconds, > 0) and memory budget (MiB) of every later call."""
    _SETTINGS.budget = budget
    _SETTINGS.memory_mib = memory_mib


def budget() -> float:
    return _SETTINGS.budget


def _forks() -> bool:
    """Whether long calls can run in killable child processes (a fork server: POSIX)."""
    return "forkserver" in multiprocessing.get_all_start_methods()


def warm_up() -> None:
    """Start the fork server now (it imports the scanner), not on the first long call."""
    if not _forks():
        return
    from multiprocessing import forkserver

    for name in _ONE_THREAD:  # read by the fork server when it starts
        os.environ.setdefault(name, "1")
    forkserver.set_forkserver_preload(list(PRELOAD))
    forkserver.ensure_running()


def _start(job: Job, result_fd: int) -> tuple[int, int]:
    """Fork a child from the fork server to run ``job``, its answer going to
    ``result_fd``; its pid and the descriptor that reports its exit status.

    What ``multiprocessing.Process`` sends a fork server, minus the main module: a
    Process makes every child import the parent's ``__main__`` (a script without an
    ``if __name__ == "__main__"`` guard would run again in each child), and nothing
    here needs it.  The fork server runs ``spawn._main``: it reads the preparation
    data (our import path and directory) and an object whose ``_bootstrap`` it calls
    (:class:`kb.mcp.child.Call`)."""
    import io
    from multiprocessing import forkserver, reduction

    warm_up()
    data = io.BytesIO()
    reduction.dump({"sys_path": sys.path, "dir": os.getcwd()}, data)
    reduction.dump(Call(job), data)
    status, to_child = forkserver.connect_to_new_process([result_fd])
    try:
        with open(to_child, "wb", closefd=True) as fh:
            fh.write(data.getbuffer())
        return forkserver.read_signed(status), status
    except BaseException:
        os.close(status)
        raise


class Jobs:
    """Long calls of one event loop, each in its own child process."""

    def __init__(self, most: int = MOST) -> None:
        self._slots = asyncio.Semaphore(most)
        self._threads = anyio.CapacityLimiter(most * 2)
        self.running: set[int] = set()  # pids, for tests and the log

    async def run(self, tool: str, kwargs: dict[str, Any], budget: float) -> Any:
        """The tool's result from a child; OverBudget when it takes longer than ``budget``
        seconds (the child is killed), CallerError or CallFailed when it says so."""
        from kb.mcp import confine

        job = Job(
            tool,
            kwargs,
            confine.root(),
            os.getcwd(),
            _SETTINGS.memory_mib,
            {k: v for k, v in os.environ.items() if k.startswith("KB_")},
        )
        try:
            with anyio.fail_after(budget):
                async with self._slots:
                    return await self._in_child(job)
        except TimeoutError:
            raise OverBudget(budget) from None

    async def _in_child(self, job: Job) -> Any:
        if not _forks():  # no fork server (Windows): a thread, abandoned past its budget
            return _answer(await anyio.to_thread.run_sync(run, job, abandon_on_cancel=True))
        receive, send = os.pipe()
        pid: int | None = None
        status = -1
        try:
            try:
                started, status = await anyio.to_thread.run_sync(
                    _start, job, send, limiter=self._threads
                )
            finally:
                os.close(send)  # the child holds the only writer: its exit is our end of file
            pid = started
            self.running.add(started)
            message = await _receive(receive)
            if message is None:
                await _readable(status)
                raise CallFailed(
                    f"the call's process ended without an answer ({_ending(_status(status))})"
                )
            return _answer(message)
        finally:
            os.close(receive)
            if pid is not None:
                _kill(pid, status)
                self.running.discard(pid)
            if status >= 0:
                with anyio.CancelScope(shield=True):
                    await _readable(status)  # the fork server reports the exit: reaped
                os.close(status)


def _answer(message: tuple[Any, ...]) -> Any:
    kind = message[0]
    if kind == "ok":
        return message[1]
    if kind == "caller":
        raise CallerError(message[1])
    raise CallFailed(f"{message[1]}", message[2] if len(message) > 2 else "")


async def _receive(fd: int) -> Any:
    """The one message a child sent (an 8-byte length, then a pickle), read on the loop
    without blocking it; None at end of file (the child died first)."""
    import pickle
    import struct

    os.set_blocking(fd, False)
    head = await _read_exactly(fd, 8)
    if head is None:
        return None
    body = await _read_exactly(fd, struct.unpack("!Q", head)[0])
    return None if body is None else pickle.loads(body)


async def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        try:
            data = os.read(fd, min(size - len(chunks), 1 << 20))
        except BlockingIOError:
            await _readable(fd)
            continue
        if not data:
            return None
        chunks += data
    return bytes(chunks)


async def _readable(fd: int) -> None:
    """Wait on the loop (no thread) until ``fd`` has data or its end of file."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _kill(pid: int, status: int) -> None:
    """The child and everything it started (its own process group), if still running.
    The group can be killed whenever it exists (its id is not reused while it does);
    the child itself only while the fork server has not reported its exit."""
    import select

    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if not select.select([status], [], [], 0)[0]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)  # killed before it made its group


def _status(fd: int) -> int | None:
    """The exit status the fork server reports for a child (negative: the signal)."""
    from multiprocessing import forkserver

    try:
        return int(forkserver.read_signed(fd))
    except (EOFError, OSError):
        return None


def _ending(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


_JOBS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Jobs] = weakref.WeakKeyDictionary()


def jobs() -> Jobs:
    """The running event loop's job runner (asyncio primitives belong to one loop)."""
    loop = asyncio.get_running_loop()
    runner = _JOBS.get(loop)
    if runner is None:
        runner = _JOBS[loop] = Jobs()
    return runner
