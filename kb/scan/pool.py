"""Reading independent files on several cores, with the serial path's results and order.

Parsing and interpreting a file needs nothing from the other files, so a scan of many
files hands them to forked workers: the parent process works through the queue too, and
each worker sends back what it read, pickled once when its share is done.  Results are
put back in file order, so a parallel scan is byte-identical to a serial one.

The pool is used only where forking is safe and pays: the ``fork`` start method on Linux
(a spawned worker would import kb and open the catalog again, costing more than most
scans), a process running no other thread (forking a threaded process such as the MCP
server, whose tools run on worker threads, can copy a lock another thread holds), and
enough source to repay the fork.  ``KB_SCAN_JOBS=1`` (or ``kb scan --jobs 1``) keeps
everything in one process.  A worker that dies is not fatal: the files it did not
return are read again in the parent.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kb.core.lifeline import die_with_parent
from kb.core.paths import files_read, note_reads

T = TypeVar("T")

#: Environment variable giving the number of processes a scan may use (1: serial).
JOBS_ENV = "KB_SCAN_JOBS"
#: Source bytes below which a scan stays serial: forking a worker and carrying its results
#: back costs a few tens of milliseconds, about what reading this much source takes.
MIN_BYTES = 256 * 1024
#: Most processes a scan starts on its own (more rarely pay on the file counts scanned).
MAX_AUTO_JOBS = 4
#: Most processes a scan starts when asked for more.
MAX_JOBS = 64


class _Failed:
    """An exception one file's work raised, kept in its place so the serial order decides
    which one the scan raises."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def jobs_wanted(requested: int | None) -> int:
    """Processes the caller asks for: ``requested``, else ``KB_SCAN_JOBS``, else the
    cores this process may run on that the machine leaves idle (see :func:`idle_cores`)."""
    if requested is not None:
        return max(1, requested)
    env = os.environ.get(JOBS_ENV, "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            return 1  # an unreadable setting: the safe choice
    return max(1, min(idle_cores(), MAX_AUTO_JOBS))


def idle_cores() -> int:
    """The cores this process may run on, or 1 when none is idle: there a second process
    only competes with the first for the same share of time (Linux shares it out per
    session), and the fork and the results' trip back are pure cost (measured on 2 busy
    cores: 6 to 20 % slower than one process)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    others = others_running()
    return cores if others is None or others < cores else 1


def others_running() -> float | None:
    """How many other tasks want a core now: the kernel's count of runnable tasks less
    this one (``/proc/loadavg``), else the 1-minute load average.  The count of the
    moment, not the average, so that the scans a benchmark or a script just ran do not
    keep the next one serial."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return max(0, int(f.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def can_fork() -> bool:
    """Forking is safe here: Linux's ``fork`` start method, no other thread running."""
    if not sys.platform.startswith("linux"):
        return False
    return threading.current_thread() is threading.main_thread() and threading.active_count() == 1


def processes_for(requested: int | None, sizes: Sequence[int]) -> int:
    """How many processes to read files of these sizes with (1: in this process only)."""
    jobs = min(jobs_wanted(requested), len(sizes), MAX_JOBS)
    if jobs <= 1 or sum(sizes) < MIN_BYTES or not can_fork():
        return 1
    return jobs


def run_ordered(work: Callable[[int], T], sizes: Sequence[int], processes: int) -> list[T]:
    """``[work(i) for i in range(len(sizes))]``, on ``processes`` processes when above 1.

    Work is taken largest first from a shared counter, so a slow worker takes fewer
    files.  An exception that ``work`` raises for a file is raised here for the first
    such file in order, as the serial loop would; one worker's death costs only a rerun
    of its files in this process.
    """
    if processes <= 1:
        return [work(i) for i in range(len(sizes))]
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    counter = ctx.Value("i", 0)
    children: list[tuple[Any, Any]] = []
    sys.stdout.flush()  # a child flushes the streams it inherits when it ends
    sys.stderr.flush()
    results: dict[int, Any] = {}
    parent = os.getpid()
    previous = _stop_children_on_signals(children)
    try:
        for _ in range(processes - 1):
            receive, send = ctx.Pipe(duplex=False)
            child = ctx.Process(
                target=_child, args=(work, order, counter, send, parent), daemon=True
            )
            child.start()
            send.close()
            children.append((child, receive))
        results.update(_share(work, order, counter))
        for child, receive in children:
            with contextlib.suppress(EOFError, OSError, pickle.UnpicklingError):
                done, reads = pickle.loads(receive.recv_bytes())  # if it died: read again below
                results.update(done)
                note_reads(reads)
            child.join()
    finally:
        _restore(previous)
        for child, receive in children:
            receive.close()
            if child.is_alive():
                child.terminate()
                child.join()
    out: list[T] = []
    for i in range(len(sizes)):
        got = results[i] if i in results else _attempt(work, i)
        if isinstance(got, _Failed):
            raise got.error
        out.append(got)
    return out


def _attempt(work: Callable[[int], T], i: int) -> T | _Failed:
    try:
        return work(i)
    except Exception as exc:  # raised again, in file order, by run_ordered
        return _Failed(exc)


def _share(work: Callable[[int], T], order: list[int], counter: Any) -> dict[int, T | _Failed]:
    """Take files off the shared counter until none is left; what each one gave."""
    done: dict[int, T | _Failed] = {}
    while True:
        with counter.get_lock():
            k = counter.value
            counter.value = k + 1
        if k >= len(order):
            return done
        done[order[k]] = _attempt(work, order[k])


#: Signals that end a scan from outside (a CI timeout, a closed terminal): the parent
#: stops its workers before it goes.
_ENDING = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def _stop_children_on_signals(children: list[Any]) -> dict[int, Any]:
    """Handlers that kill the workers, then let the signal do what it did before (end
    the process, or the caller's own handler).  Only the main thread may set them; the
    workers would still die with it (:func:`kb.core.lifeline.die_with_parent`)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {}

    def stop(signum: int, frame: Any) -> None:
        for child, _receive in children:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                if child.pid is not None:
                    os.kill(child.pid, signal.SIGKILL)
        _restore(previous)
        os.kill(os.getpid(), signum)  # delivered again, to what handled it before

    for signum in _ENDING:
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue  # ignored (nohup): the scan goes on, and so do its workers
        with contextlib.suppress(OSError, ValueError):
            previous[signum] = signal.signal(signum, stop)
    return previous


def _restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        with contextlib.suppress(OSError, ValueError, TypeError):
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _child(
    work: Callable[[int], Any], order: list[int], counter: Any, send: Any, parent: int
) -> None:
    """A worker: its share of the files, sent back in one message.  Ctrl-C is the
    parent's to handle (it stops the workers), SIGTERM and SIGHUP end the worker as
    they would any process, and the parent's death, whatever its cause, ends it too.
    A result that cannot be pickled is left for the parent to compute.  The files it
    read go back too (an output may not replace an input,
    :func:`kb.core.paths.record_reads`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in _ENDING:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    die_with_parent(parent)
    done = _share(work, order, counter)
    try:
        blob = pickle.dumps((done, files_read()), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # the parent reads these files itself
        blob = pickle.dumps(({}, {}), protocol=pickle.HIGHEST_PROTOCOL)
    send.send_bytes(blob)
    send.close()
