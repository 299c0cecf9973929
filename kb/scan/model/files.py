"""Every file the model reader opens goes through :func:`read_source`.

The reader follows imports, reads configuration modules and the checkpoint's JSON
config; one function doing all of it means one place to bound what is read (regular
files only, never blocking on a FIFO, a size cap) and one place where a confinement of
reads (``kb mcp --root``, :func:`kb.core.paths.confine_reads`) applies.  A file that is
not read is never an error of the scan: the caller gets a :class:`Refusal` saying why,
and the plan names it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kb.core.paths import describe_os_error, read_regular_file
from kb.scan.sources import SourceError, decode

#: The largest file the reader follows into (the scanned files themselves have their own cap).
MAX_FILE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Refusal:
    """A file the reader did not read, and why (said in the plan, never raised)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def read_source(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> str | Refusal:
    """The text of one file the reader follows (Python source or JSON), or why not.

    Regular files only (a FIFO or device is refused before it is opened), at most
    ``limit`` bytes, decoded as Python decodes source (a PEP 263 cookie, else UTF-8).
    """
    name = os.fspath(path)
    try:
        raw = read_regular_file(name, limit + 1)
    except OSError as exc:  # NotRegularFile, OutsideRoot and the failing call's own error
        return Refusal(name, describe_os_error(exc))
    except ValueError as exc:  # an embedded NUL byte in the path
        return Refusal(name, f"cannot read: {exc}")
    if len(raw) > limit:
        return Refusal(name, f"larger than the {limit} byte limit of a file the reader follows")
    try:
        return decode(raw)
    except SourceError as exc:
        return Refusal(name, exc.message)
