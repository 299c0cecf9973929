"""Records and search index kept open in a long-running process, reopened on change.

A command pays for opening the compiled catalog and the index on every call; the MCP
server opens them once.  Each call still compares the record tree's fingerprint (a
``stat`` of every record file, about a millisecond), so an edited record is picked up
by the next call without a restart.  Records that stop validating give every call the
same clear error until they are fixed, without re-validating an unchanged tree.

The state is kept per thread: a SQLite connection and a search searcher belong to the
thread that opened them, and the server runs its tools on a few long-lived worker
threads (:mod:`kb.mcp.workers`), each with its own warm copy.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kb.catalog.compiled import Catalog, StoreInvalid, fingerprint, open_catalog
from kb.core.paths import records_dir

if TYPE_CHECKING:
    from kb.index.search import Session


@dataclass
class Snapshot:
    """The catalog of one fingerprint, with its search session opened on first use."""

    catalog: Catalog
    _session: Session | None = field(default=None, repr=False)

    def session(self) -> Session:
        if self._session is None:
            from kb.index.search import Session, open_index

            self._session = Session(open_index(self.catalog))
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


class Warm:
    """The current :class:`Snapshot` of a record tree (``KB_RECORDS_DIR`` or the shipped)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or records_dir()).resolve()
        self.reloads = 0
        self._fingerprint: str | None = None
        self._snapshot: Snapshot | None = None
        self._invalid: StoreInvalid | None = None

    def current(self) -> Snapshot:
        """The snapshot for the records as they are now; StoreInvalid if they do not validate."""
        fp = fingerprint(self.root)
        if fp == self._fingerprint:
            if self._invalid is not None:
                raise self._invalid
            if self._snapshot is not None:
                return self._snapshot
        self._fingerprint = fp
        try:
            catalog = open_catalog(self.root)
        except StoreInvalid as exc:
            self._invalid = exc
            raise
        self._invalid = None
        if self._snapshot is not None:
            self._snapshot.close()
        self._snapshot = Snapshot(catalog)
        self.reloads += 1
        return self._snapshot


_LOCAL = threading.local()


def state() -> Warm:
    """This thread's warm state (created on its first use)."""
    warm: Warm | None = getattr(_LOCAL, "warm", None)
    if warm is None:
        warm = _LOCAL.warm = Warm()
    return warm
