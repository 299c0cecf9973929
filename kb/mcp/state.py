"""Records and search index kept open in a long-running process, reopened on change.

A command pays for opening the compiled catalog and the index on every call; the MCP
server opens them once.  Each call still asks :class:`Watch` whether a record file
changed (one ``stat`` per record file and directory, a fraction of a millisecond), so
an edited record is picked up by the next call without a restart.  Records that stop
validating give every call the same clear error until they are fixed, without
re-validating an unchanged tree.

The search side is the index's term table, read into memory and checked against the
index's stamp as read (:func:`kb.index.searchindex.load_terms`): nothing is mapped, so
a cache file cut short under the running server changes nothing, and a query costs a
few dictionary lookups.  Only an index that lives in memory (the cache cannot be
written) is searched through whoosh.

The state is kept per thread: a SQLite connection belongs to the thread that opened it.
The server answers quick tools on its event loop's thread (one warm copy); the slow
part of a reload (validating records, building the index) runs on a helper thread
first (:meth:`Warm.prepare`), so the loop only opens what is already built.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.catalog.compiled import Catalog, StoreInvalid, open_catalog
from kb.core.paths import records_dir

if TYPE_CHECKING:
    from kb.index.fulltext import Session
    from kb.index.termtable import TermTable

#: What a stat says of a file or directory that matters here.
StatKey = tuple[int, int, int, int]


def _stat_key(path: str) -> StatKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


class Watch:
    """Whether a record tree changed since the last look.

    The record files are the ones :func:`kb.catalog.recordfiles.scan` finds (the same
    walk the catalog uses).  Where the kernel reports changes (Linux's inotify, on every
    record directory and on the targets of linked record files), a look is one read of
    the event queue; a full look (a ``stat`` of every record file and directory) runs
    at most every :data:`VERIFY_SECONDS` besides, for file systems that report nothing
    (network mounts) or an event queue that overflowed.  Without inotify every look is
    a full one.  A file added, removed or renamed changes its directory's times, so
    while no directory changed the list of files is the same.  The package's own code
    and data are not watched: a running server keeps the code it loaded.
    """

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self._dirs: list[tuple[str, StatKey | None]] = []
        self._files: list[str] = []
        self._keys: list[StatKey | None] | None = None
        self._events = _Events.open()
        self._verified = 0.0

    def changed(self) -> bool:
        """True on the first call and whenever a record file or directory changed."""
        now = time.monotonic()
        quiet = self._events is not None and not self._events.pending()
        if self._keys is not None and quiet and now - self._verified < VERIFY_SECONDS:
            return False
        self._verified = now
        if self._keys is None or any(_stat_key(d) != key for d, key in self._dirs):
            self._rescan()
        keys = [_stat_key(f) for f in self._files]
        if keys == self._keys:
            return False
        self._keys = keys
        return True

    def _rescan(self) -> None:
        from kb.catalog.recordfiles import scan

        dirs: list[str] = []
        stack = [self.root]
        while stack:  # every directory the record walk enters (hidden ones it skips)
            here = stack.pop()
            dirs.append(here)
            try:
                with os.scandir(here) as it:
                    stack += [
                        e.path
                        for e in it
                        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
                    ]
            except OSError:
                continue
        if self._events is not None and not self._events.watch(dirs):
            self._events.close()  # too many to watch: every look is a full one
            self._events = None
        keyed = [(d, _stat_key(d)) for d in dirs]  # before the files: a later change shows
        self._files = scan(self.root)[0]
        linked = [f for f in self._files if os.path.islink(f)]
        if self._events is not None and not self._events.watch(linked):
            self._events.close()
            self._events = None
        self._dirs = keyed
        self._keys = None

    def close(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None


#: Seconds between full looks at a watched tree (see :class:`Watch`).
VERIFY_SECONDS = 2.0


class _Events:
    """A non-blocking inotify queue (Linux), through the C library."""

    #: modify, attrib, close-write, moved from/to, create, delete, delete-self, move-self
    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800

    def __init__(self, libc: Any, fd: int) -> None:
        self._libc = libc
        self._fd = fd

    @classmethod
    def open(cls) -> _Events | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(libc, fd) if fd >= 0 else None

    def watch(self, paths: list[str]) -> bool:
        """Watch each path (a directory, or a linked file's target); False when the
        kernel refuses one (too many watches): then nothing is trusted to it."""
        for path in paths:
            if self._libc.inotify_add_watch(self._fd, os.fsencode(path), self.MASK) < 0:
                return False
        return True

    def pending(self) -> bool:
        """Whether anything happened since the last call (the queue is emptied)."""
        seen = False
        while True:
            try:
                if not os.read(self._fd, 65536):
                    return seen
            except BlockingIOError:
                return seen
            except OSError:
                return True
            seen = True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class WarmCatalog(Catalog):
    """A catalog that keeps the records it decoded (the most recent :data:`KEEP` by
    name, and the full listings).

    A record is a read-only value for every reader (the lint context shares one between
    rules); a long-running server decoding the same large records for every ``check``
    and ``show`` spent a third of those calls in ``json.loads``.  One per snapshot, so
    an edit (a new snapshot) starts afresh.
    """

    KEEP = 512

    def __init__(self, base: Catalog) -> None:  # shares the base catalog's connection
        self.__dict__.update(base.__dict__)
        self._kept: collections.OrderedDict[str, dict[str, Any] | None] = collections.OrderedDict()
        self._all: dict[str | None, list[dict[str, Any]]] = {}

    def records(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        """Every record (of ``kind``), decoded once per snapshot: ``list`` and the
        resource listing read them all."""
        if kind not in self._all:
            self._all[kind] = list(super().records(kind))
        yield from self._all[kind]

    def get(self, spelling: str) -> dict[str, Any] | None:
        kept = self._kept
        if spelling in kept:
            kept.move_to_end(spelling)
            return kept[spelling]
        rec = super().get(spelling)
        kept[spelling] = rec
        if len(kept) > self.KEEP:
            kept.popitem(last=False)
        return rec


@dataclass
class Snapshot:
    """The catalog of one state of the records, with its search side opened on first use."""

    catalog: Catalog
    _session: Session | TermTable | None = field(default=None, repr=False)

    def session(self) -> Session | TermTable:
        """The term table in memory (building the index first when none verifies); whoosh
        only for an index that lives in memory."""
        if self._session is None:
            from kb.index.searchindex import load_terms, open_index

            table = load_terms(self.catalog)
            if table is None:
                ix = open_index(self.catalog)  # builds it when missing or damaged
                table = load_terms(self.catalog)
                if table is None:
                    from kb.index.fulltext import Session

                    self._session = Session(ix)
                    return self._session
            self._session = table
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def prepare(root: Path) -> StoreInvalid | None:
    """Build what opening the records and searching them needs (the compiled catalog and
    the index) for the tree as it is now; the records' problems when they do not validate.
    Slow after an edit (validation, indexing): the server runs it off its event loop."""
    try:
        catalog = open_catalog(root)
    except StoreInvalid as exc:
        return exc
    from kb.index.searchindex import load_terms, open_index

    table = load_terms(catalog)
    if table is None:
        open_index(catalog)
    else:
        table.close()
    return None


class Warm:
    """The current :class:`Snapshot` of a record tree (``KB_RECORDS_DIR`` or the shipped)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or records_dir()).resolve()
        self.reloads = 0
        self.changes = 0  # how many times the watch saw the tree change
        self.watch = Watch(self.root)
        self._dirty = True
        self._snapshot: Snapshot | None = None
        self._invalid: StoreInvalid | None = None

    def stale(self) -> bool:
        """The records changed since the snapshot was opened (cheap: stat calls only)."""
        if self.watch.changed():
            self._dirty = True
            self.changes += 1
        return self._dirty

    def prepared(self, outcome: StoreInvalid | None) -> None:
        """What :func:`prepare` found, run after :meth:`stale` said True: problems are
        kept (not validated again here); a good tree is opened by the next call."""
        if outcome is not None:
            self._replace(None)
            self._invalid = outcome
            self._dirty = False

    def current(self, look: bool = True) -> Snapshot:
        """The snapshot for the records as they are now; StoreInvalid if they do not
        validate.  ``look=False``: the caller just asked :meth:`stale`."""
        if self.stale() if look else self._dirty:
            self._dirty = False
            try:
                catalog = open_catalog(self.root)
            except StoreInvalid as exc:
                self._replace(None)
                self._invalid = exc
                raise
            self._replace(Snapshot(WarmCatalog(catalog)))
            self.reloads += 1
        if self._invalid is not None:
            raise self._invalid
        assert self._snapshot is not None
        return self._snapshot

    def _replace(self, snapshot: Snapshot | None) -> None:
        if self._snapshot is not None:
            self._snapshot.close()
        self._snapshot = snapshot
        self._invalid = None


_LOCAL = threading.local()
#: The snapshot the server opened for the call running in this context (None: the tool
#: asks its thread's :func:`state`).
CURRENT: ContextVar[Snapshot | None] = ContextVar("kb_mcp_snapshot", default=None)


def state() -> Warm:
    """This thread's warm state (created on its first use)."""
    warm: Warm | None = getattr(_LOCAL, "warm", None)
    if warm is None:
        warm = _LOCAL.warm = Warm()
    return warm


def reset() -> None:
    """Forget this thread's state (a child process starting a call anew)."""
    _LOCAL.__dict__.clear()
