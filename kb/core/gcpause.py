"""Pausing Python's cyclic garbage collector while kb builds large object graphs.

Loading a 4 MB candidate list, compiling the records or filling the search index
creates hundreds of thousands of objects that form no reference cycles.  Each
collection the allocations trigger rescans everything still alive, which made up most
of the time of those steps; reference counting frees what they drop either way.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the previous state afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
