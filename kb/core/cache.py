"""kb's own corner of the cache directory: locks, private temp dirs and ownership.

Everything kb derives (the compiled records, the search index) is built under a file
lock, in a private temporary directory, then renamed into place, so a reader never
sees half a build and two builders never collide.  Each directory kb creates holds a
marker file; kb removes only directories that carry it, so a user's
``index-of-my-photos`` next to ours is never touched.  A build killed half-way leaves a
marked temp dir that the next build of the same tree removes.  When the cache
directory cannot be used at all, callers work uncached (in memory) after one note.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kb.core.paths import cache_dir

MARKER = ".kb-owned"
TMP_PREFIX = ".kb-tmp-"
#: How long a build may hold its lock before others give up and work uncached.
LOCK_TIMEOUT_S = 120.0
#: A marked temp dir this old is a leftover even if its pid now names a live process.
STALE_TMP_S = 3600.0

_noted: set[str] = set()


class CacheUnavailable(Exception):
    """The cache cannot be used for this build (unwritable, busy too long, not ours)."""


def note(message: str) -> None:
    """One line on stderr, at most once per process and message."""
    if message in _noted:
        return
    _noted.add(message)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(f"kb: {message}", file=sys.stderr)


def usable_dir() -> Path:
    """The cache directory, created when missing; CacheUnavailable when it cannot be written."""
    path = cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise NotADirectoryError(20, "not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as exc:
        raise CacheUnavailable(
            f"cache directory {path} is not usable ({exc.strerror or exc})"
        ) from None
    return path


@contextlib.contextmanager
def locked(directory: Path, tag: str) -> Iterator[None]:
    """Hold the build lock of ``tag`` (one per record tree) in ``directory``."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(directory / f".kb-{tag}.lock"), timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout:
        raise CacheUnavailable(
            f"another kb process has held the cache lock for over {LOCK_TIMEOUT_S:.0f} s"
        ) from None
    except OSError as exc:
        raise CacheUnavailable(f"cannot lock the cache ({exc.strerror or exc})") from None
    try:
        yield
    finally:
        lock.release()


def mark(directory: Path, **info: object) -> None:
    """Claim a directory as kb's: only marked directories are ever removed."""
    payload = {"pid": os.getpid(), "created": time.time(), **info}
    (directory / MARKER).write_text(json.dumps(payload), encoding="utf-8")


def owned(directory: Path) -> dict[str, object] | None:
    """The marker of a kb-owned directory, None for anything else."""
    try:
        if directory.is_symlink() or not directory.is_dir():
            return None
        data = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def remove_owned(directory: Path) -> bool:
    """Delete ``directory`` if (and only if) kb's marker is in it."""
    if owned(directory) is None:
        return False
    _rmtree(directory)
    return True


def _rmtree(directory: Path) -> None:
    import shutil  # only when there is something to remove (see private_tmpdir)

    shutil.rmtree(directory, ignore_errors=True)


def private_tmpdir(directory: Path, tag: str) -> Path:
    """A fresh marked temp dir for one build of ``tag``, inside the cache directory
    (same filesystem, so the finished result can be renamed into place)."""
    import tempfile  # builds only: a query imports this module and never makes a temp dir

    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{tag}-{os.getpid()}-", dir=directory))
    mark(tmp, tag=tag)
    return tmp


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def clean_dead() -> None:
    """Remove marked temp dirs whose process is gone, without any lock (safe: no live
    process owns them).  Cheap enough for every search; builds also call clean_stale."""
    try:
        entries = list(cache_dir().glob(f"{TMP_PREFIX}*"))
    except OSError:
        return
    for entry in entries:
        info = owned(entry)
        if info is None:
            _remove_if_unmarked_and_empty(entry)
        elif not _alive(info.get("pid")):
            _rmtree(entry)


def _remove_if_unmarked_and_empty(entry: Path) -> None:
    """A build killed between creating its temp dir and finishing its marker leaves it
    empty, or holding only a half-written marker: remove it when the pid in its name is
    gone (only the marker file is unlinked, and rmdir cannot remove anything else)."""
    parts = entry.name[len(TMP_PREFIX) :].split("-")
    pid = int(parts[-2]) if len(parts) >= 2 and parts[-2].isdigit() else None
    if pid is None or _alive(pid) or entry.is_symlink():
        return
    with contextlib.suppress(OSError):
        if [p.name for p in entry.iterdir()] == [MARKER]:
            (entry / MARKER).unlink()
        entry.rmdir()


def clean_stale(directory: Path, tag: str) -> None:
    """Remove marked temp dirs of builds that died (kill -9, power loss).

    Called with ``tag``'s lock held: no live build of ``tag`` has a temp dir then, so
    its leftovers go whatever their pid says; other trees' leftovers go once their
    process is gone or they are older than an hour.
    """
    now = time.time()
    for entry in directory.glob(f"{TMP_PREFIX}*"):
        info = owned(entry)
        if info is None:
            _remove_if_unmarked_and_empty(entry)
            continue
        created = info.get("created")
        age = now - created if isinstance(created, (int, float)) else STALE_TMP_S
        pid = info.get("pid")
        mine = info.get("tag") == tag and pid != os.getpid()
        if mine or not _alive(pid) or age >= STALE_TMP_S:
            _rmtree(entry)


def open_store(path: Path, schema: str, *, timeout: float) -> Any:
    """A sqlite cache store at ``path`` with ``schema`` (``CREATE … IF NOT EXISTS``)
    applied, or None when it cannot be used now (busy, read-only, unwritable).  A file
    there that is not a database (any more) is replaced by a new store, once: a damaged
    store would otherwise be skipped by every later run."""
    import sqlite3

    for _attempt in range(2):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(path, timeout=timeout)
        except (OSError, sqlite3.Error):
            return None
        try:
            con.executescript(schema)
            return con
        except sqlite3.OperationalError:
            con.close()
            return None
        except sqlite3.DatabaseError:
            con.close()
            try:
                path.unlink()
            except OSError:
                return None
    return None
