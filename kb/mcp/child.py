"""The child side of a long tool call (:mod:`kb.mcp.workers`): one call, then exit.

The child makes its own process group (the server kills the group, the scan's own
file readers included), asks to die with its parent, caps its memory, takes the
server's working directory, ``KB_*`` settings and root, runs the tool and sends back
one message: ``("ok", result)``, ``("caller", message)`` for arguments or input the
tool refuses (the agent's to fix), or ``("internal", message, traceback)``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import traceback
from dataclasses import dataclass, field
from typing import Any

from kb.core.lifeline import die_with_parent

_MIB = 1024 * 1024


@dataclass(frozen=True)
class Job:
    """What a child needs to answer one call exactly as the server would."""

    tool: str
    kwargs: dict[str, Any]
    root: str
    cwd: str
    memory_mib: int
    env: dict[str, str] = field(default_factory=dict)


class Call:
    """What the fork server runs in a new child: ``_bootstrap`` is the method it calls
    (as on a ``multiprocessing.Process``); the answer goes to the descriptor it was
    handed with the call."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def _bootstrap(self, parent_sentinel: Any = None) -> int:
        from multiprocessing import forkserver

        _isolate()
        (fd,) = forkserver.get_inherited_fds() or [-1]
        _settle(self.job)
        message = run(self.job)
        try:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:  # the answer itself did not fit
            data = pickle.dumps(("caller", memory_message(self.job.memory_mib)))
        with open(fd, "wb", closefd=True) as out:
            out.write(struct.pack("!Q", len(data)))
            out.write(data)
        return 0


def run(job: Job) -> tuple[Any, ...]:
    """``job``'s outcome as the message the server reads (see the module's docstring)."""
    try:
        return ("ok", _run(job))
    except MemoryError:
        return ("caller", memory_message(job.memory_mib))
    except RecursionError:
        return ("caller", "the input nests too deeply to be read; give a flatter one")
    except BaseException as exc:  # every outcome is reported, never lost
        from kb.mcp.tools import CALLER_ERRORS

        if isinstance(exc, CALLER_ERRORS):
            text = str(exc).strip()
            return ("caller", text or f"the arguments were refused ({type(exc).__name__})")
        return (
            "internal",
            f"{job.tool} failed inside the server ({type(exc).__name__}); its log "
            "(standard error) has the details",
            traceback.format_exc(),
        )


def memory_message(mib: int) -> str:
    return (
        f"the call needed more than the {mib} MiB of memory one call may use and was "
        "stopped; ask for less (smaller arrays, a smaller file or directory)"
    )


def _run(job: Job) -> Any:
    from kb.mcp import confine, state
    from kb.mcp.tools import tool_named

    confine.set_root(job.root)
    state.reset()
    return tool_named(job.tool).fn(**job.kwargs)


def _isolate() -> None:
    """Own process group, nothing on the wire, death with the parent."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # whatever a library prints goes to the log, never to the client
    die_with_parent()  # the fork server's exit kills us


def _settle(job: Job) -> None:
    """The server's directory, settings and a memory cap."""
    with contextlib.suppress(OSError):
        os.chdir(job.cwd)
    for key in [k for k in os.environ if k.startswith("KB_")]:
        del os.environ[key]
    os.environ.update(job.env)
    _cap_memory(job.memory_mib)


def _cap_memory(mib: int) -> None:
    """Allow ``mib`` MiB of data beyond what the process holds now (Linux counts private
    anonymous mappings, so numpy's large arrays too)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return
    now = _data_bytes()
    if now is None:
        return
    limit = now + mib * _MIB
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _data_bytes() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
