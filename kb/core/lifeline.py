"""Child processes that do not outlive their parent.

A worker forked to share a scan, or a child running one server call, has no use once
its parent is gone: nobody reads its answer.  On Linux the kernel kills it when the
parent dies, whatever the parent died of (``PR_SET_PDEATHSIG``, even SIGKILL); a
parent that died between the fork and that request is caught by comparing the parent
pid afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """Ask the kernel for SIGKILL when the parent goes; exit now if it already went
    (``parent``: the pid the child was forked from; else any reparenting to init)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    now = os.getppid()
    if (parent is not None and now != parent) or now == 1:
        os._exit(1)
