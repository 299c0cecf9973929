"""The compiled record cache: validated records as JSON in one SQLite file.

``kb show`` must answer in tens of milliseconds, so it must not parse and validate
every YAML file.  The first call after any change of the records (or of the code that
validates them) runs the full store and writes this cache; later calls read one row.

Trust is earned by content, not by timestamps: the cache stores the hash of every
record's bytes.  A call first compares a key of the files' stat data (size, mtime,
inode *and* ctime, which ``touch -r``, ``cp -p`` and tar cannot set back), and on any
difference hashes the bytes and compares those.  Each cached body carries its own
checksum, so bit rot is caught on read; any unreadable or corrupt cache is rebuilt,
and a cache directory that cannot be written means working in memory.  Builds happen
under a lock in a private temp dir (:mod:`kb.core.cache`) and are renamed into place.
Nothing here imports pydantic or PyYAML unless a rebuild is needed.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kb.catalog.codekey import code_inputs
from kb.core.paths import cache_dir, is_utf8, records_dir

try:  # the builtin module avoids importing OpenSSL through hashlib (a few ms per call)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - every CPython has _blake2
    from hashlib import blake2b

FORMAT_VERSION = "5"
MEMORY = ":memory:"


class StoreInvalid(Exception):
    """The records do not validate; ``problems`` says where, and so does the message
    (the first few), so a test or a log that shows only the exception names them."""

    SHOWN = 10

    def __init__(self, problems: list[Any]) -> None:
        lines = [f"{len(problems)} problem(s) in the records"]
        lines += [f"  {p}" for p in problems[: self.SHOWN]]
        if len(problems) > self.SHOWN:
            lines.append(f"  … and {len(problems) - self.SHOWN} more (kb validate lists them all)")
        super().__init__("\n".join(lines))
        self.problems = problems


class CacheCorrupt(Exception):
    """A cached row failed its checksum or the database could not be read."""


def _inputs(root: Path) -> tuple[list[tuple[str, str]], bool]:
    """(relative name, path) of every file the cache depends on; and whether discovery
    found problems (then only a full validation can say what is wrong)."""
    from kb.catalog.recordfiles import scan

    top = str(root)
    if not root.is_dir() or not is_utf8(top):
        return [], True
    files, problems = scan(top)
    cut = len(top.rstrip(os.sep)) + 1
    named = [(p[cut:], p) for p in files]
    named += code_inputs()
    return named, bool(problems)


def stat_key(root: Path, inputs: list[tuple[str, str]]) -> str:
    """Cheap identity of the inputs: names, sizes, mtimes, inodes and ctimes."""
    lines = [f"{FORMAT_VERSION}\0{root}\n"]
    stat = os.stat
    for rel, path in inputs:
        try:
            st = stat(path)
        except OSError:
            lines.append(f"{rel}\0missing\n")
            continue
        lines.append(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_ctime_ns}\n")
    # one update of the whole text: the digest sequential updates gave, at a lower cost
    return blake2b("".join(lines).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def fingerprint(root: Path) -> str:
    """The stat key of a record tree as it is now: a long-running process (``kb mcp``)
    compares it per call to notice edits without reopening the catalog."""
    return stat_key(root, _inputs(root)[0])


def content_key(inputs: list[tuple[str, str]]) -> str:
    """Identity of the inputs' bytes (keys the search index, proves the cache fresh)."""
    h = blake2b(digest_size=16)
    h.update(FORMAT_VERSION.encode())
    for rel, path in inputs:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            data = b"\xff<unreadable>"
        h.update(f"{rel}\0{len(data)}\0".encode("utf-8", "surrogateescape"))
        h.update(data)
    return h.hexdigest()


def root_key(root: Path) -> str:
    return blake2b(str(root).encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def db_path(root: Path) -> Path:
    return cache_dir() / f"records-{root_key(root)}.sqlite"


def _digest(*parts: str) -> str:
    h = blake2b(digest_size=16)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def _fill(con: sqlite3.Connection, root: Path, meta: dict[str, str]) -> None:
    """Validate everything and write the tables; raise StoreInvalid on any problem."""
    from kb.core.gcpause import collector_paused

    # the whole fill, not only the loading: dumping 381 models with the collector on
    # rescanned every loaded record and YAML node at each collection (a third of a compile)
    with collector_paused():
        _fill_paused(con, root, meta)


def _fill_paused(con: sqlite3.Connection, root: Path, meta: dict[str, str]) -> None:
    from kb.catalog.store import load_store

    result = load_store(root)
    if result.problems:
        raise StoreInvalid(result.problems)
    from kb.catalog.releases import enrich

    con.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        CREATE TABLE records (name TEXT PRIMARY KEY, kind TEXT, category TEXT,
                              status TEXT, file TEXT, body TEXT, digest TEXT);
        CREATE TABLE names (spelling TEXT PRIMARY KEY, name TEXT);
        """
    )
    rows = []
    for name, loaded in sorted(result.records.items()):
        rec = loaded.record
        body = rec.model_dump(mode="json", by_alias=True)
        enrich(body)  # torch_npu release facts, unless the record states its own
        text = json.dumps(body, ensure_ascii=False)
        cols = (
            name,
            body["kind"],
            body.get("category") or body.get("module") or "",
            body.get("status", ""),
            loaded.file,
            text,
        )
        rows.append((*cols, _digest(*cols)))
    con.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?)", rows)
    con.executemany("INSERT INTO names VALUES (?,?)", sorted(result.names.items()))
    con.executemany("INSERT INTO meta VALUES (?,?)", {**meta, "root": str(root)}.items())
    con.commit()


def build(root: Path, target: Path, meta: dict[str, str]) -> None:
    """Write a complete cache file at ``target`` (a fresh path in a private temp dir)."""
    con = sqlite3.connect(target)
    try:
        # a private file, renamed into place only once complete, and every row checked
        # on read: no rollback journal or flush to disk is needed while writing it
        con.execute("PRAGMA journal_mode = OFF")
        con.execute("PRAGMA synchronous = OFF")
        _fill(con, root, meta)
    finally:
        con.close()


def _open_ro(target: Path) -> tuple[sqlite3.Connection, dict[str, str]] | None:
    """A read-only connection and the meta table, or None when missing or unreadable."""
    try:
        if not target.is_file():
            return None
        # a URI built by escaping: a cache dir holding ?, # or % is still that path
        con = sqlite3.connect(target.absolute().as_uri() + "?mode=ro", uri=True)
    except (OSError, sqlite3.Error):
        return None
    try:
        meta = dict(con.execute("SELECT key, value FROM meta"))
    except sqlite3.Error:
        con.close()
        return None
    return con, meta


def _refresh_stat_key(target: Path, key: str) -> None:
    """Same bytes, new stat data (a checkout, ``touch``): remember the new key, best effort."""
    try:
        con = sqlite3.connect(target, timeout=0.5)
        with con:
            con.execute("UPDATE meta SET value = ? WHERE key = 'stat'", (key,))
        con.close()
    except sqlite3.Error:
        pass


class Catalog:
    """Read-only view of the compiled records.

    A query that meets a corrupt page or a body whose checksum fails rebuilds the cache
    once and asks again (then in memory), so rot is healed, never shown.
    """

    def __init__(self, con: sqlite3.Connection, meta: dict[str, str], *, root: Path) -> None:
        self._con = con
        self.root = root
        self._meta = meta
        self._healed = False

    @property
    def content(self) -> str:
        return self._meta["content"]

    @property
    def in_memory(self) -> bool:
        return self._meta.get("where") == MEMORY

    def _heal(self) -> None:
        """Replace a corrupt cache: rebuild it on disk, or in memory if that fails too."""
        if self._healed:
            raise CacheCorrupt("the compiled record cache is corrupt even after a rebuild")
        self._healed = True
        self._con.close()
        fresh = open_catalog(self.root, rebuild=True, memory=self.in_memory)
        self._con, self._meta = fresh._con, fresh._meta

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        while True:
            try:
                return self._con.execute(sql, args).fetchall()
            except sqlite3.DatabaseError:
                self._heal()

    def _bodies(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Bodies of the selected rows (all seven columns), each checked against its digest."""
        while True:
            rows = self._rows(sql, args)
            try:
                return [_checked(row) for row in rows]
            except CacheCorrupt:
                self._heal()

    def resolve(self, spelling: str) -> str | None:
        """Record name for a spelling: exact, call path, alias or case-insensitive.

        An operator's overload (``torch_npu.npu_x.out``, ``torch.ops.atb.npu_x.default``)
        names the operator: no record name has a dot, so a dotted rest is name + overload.
        """
        rows = self._rows("SELECT name FROM names WHERE spelling = ?", (spelling,))
        if not rows:
            from kb.vocab.call_paths import bare_operator  # only a miss pays for it

            stripped = bare_operator(spelling.strip())
            rows = self._rows(
                "SELECT name FROM names WHERE spelling = ? COLLATE NOCASE", (stripped,)
            )
            head, dot, overload = stripped.partition(".")
            if not rows and dot and overload.isidentifier():
                rows = self._rows(
                    "SELECT name FROM names WHERE spelling = ? COLLATE NOCASE", (head,)
                )
        return str(rows[0][0]) if rows else None

    def get(self, spelling: str) -> dict[str, Any] | None:
        name = self.resolve(spelling)
        if name is None:
            return None
        found = self._bodies("SELECT * FROM records WHERE name = ?", (name,))
        if not found and not self._healed:  # a name that leads nowhere: the names rotted
            self._heal()
            return self.get(spelling)
        return found[0] if found else None

    def file_of(self, name: str) -> str | None:
        rows = self._rows("SELECT file FROM records WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    def spellings(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT spelling FROM names")]

    def digests(self) -> dict[str, str]:
        """Each record's row digest (name, kind, file and body): what a reader keyed on
        a record's content compares, without loading and re-serialising the body."""
        return {str(n): str(d) for n, d in self._rows("SELECT name, digest FROM records")}

    def count(self) -> int:
        """How many records (what ``len(names())`` says, without reading and sorting them)."""
        return int(self._rows("SELECT count(*) FROM records")[0][0])

    def names(self, kind: str | None = None) -> list[str]:
        if kind:
            return [
                r[0]
                for r in self._rows(
                    "SELECT name FROM records WHERE kind = ? ORDER BY name", (kind,)
                )
            ]
        return [r[0] for r in self._rows("SELECT name FROM records ORDER BY name")]

    def records(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        if kind:
            yield from self._bodies("SELECT * FROM records WHERE kind = ? ORDER BY name", (kind,))
        else:
            yield from self._bodies("SELECT * FROM records ORDER BY kind, name")


def _checked(row: tuple[Any, ...]) -> dict[str, Any]:
    *cols, digest = row
    if _digest(*(str(c) for c in cols)) != digest:
        raise CacheCorrupt(f"cached record {cols[0]!r} fails its checksum")
    try:
        body = json.loads(cols[5])
    except ValueError:
        raise CacheCorrupt(f"cached record {cols[0]!r} is not JSON") from None
    return body  # type: ignore[no-any-return]


def open_catalog(
    root: Path | None = None, *, rebuild: bool = False, memory: bool = False
) -> Catalog:
    """The compiled catalog for ``root``, rebuilt first when stale, corrupt or asked.

    Raises StoreInvalid when the records do not validate.  ``memory`` (or a cache
    directory that cannot be written) builds into memory instead of the cache file.
    """
    root = (root or records_dir()).resolve()
    inputs, broken = _inputs(root)
    skey = stat_key(root, inputs)
    target = db_path(root)
    if not (rebuild or broken or memory):
        fresh = _fresh(target, inputs, skey)
        if fresh is not None:
            return Catalog(*fresh, root=root)
    meta = {"format": FORMAT_VERSION, "stat": skey, "content": content_key(inputs)}
    if memory:
        return _in_memory(root, meta)
    from kb.core import cache

    try:
        directory = cache.usable_dir()
        with cache.locked(directory, f"{root_key(root)}-records"):
            cache.clean_stale(directory, f"{root_key(root)}-records")
            if not rebuild and not broken:  # built by another process while we waited?
                fresh = _fresh(target, inputs, skey)
                if fresh is not None:
                    return Catalog(*fresh, root=root)
            tmp = cache.private_tmpdir(directory, f"{root_key(root)}-records")
            try:
                build(root, tmp / "records.sqlite", meta)
                os.replace(tmp / "records.sqlite", target)
            finally:
                cache.remove_owned(tmp)
    except cache.CacheUnavailable as exc:
        cache.note(f"{exc}; working without a cache")
        return _in_memory(root, meta)
    except (OSError, sqlite3.Error) as exc:  # a full disk reaches sqlite as OperationalError
        reason = getattr(exc, "strerror", None) or exc
        cache.note(f"cannot write {target} ({reason}); working without a cache")
        return _in_memory(root, meta)
    opened = _open_ro(target)
    if opened is None:
        return _in_memory(root, meta)
    return Catalog(*opened, root=root)


def is_current(root: Path | None = None) -> bool:
    """Does the compiled cache of ``root`` hold the records as they are now?  By stat
    data alone (no hashing): a tree touched but unchanged answers False, which costs a
    caller that then opens the catalog nothing but a content check."""
    root = (root or records_dir()).resolve()
    inputs, broken = _inputs(root)
    opened = None if broken else _open_ro(db_path(root))
    if opened is None:
        return False
    con, meta = opened
    con.close()
    return meta.get("format") == FORMAT_VERSION and meta.get("stat") == stat_key(root, inputs)


def _fresh(
    target: Path, inputs: list[tuple[str, str]], skey: str
) -> tuple[sqlite3.Connection, dict[str, str]] | None:
    """The cache at ``target`` when it holds exactly the current inputs."""
    opened = _open_ro(target)
    if opened is None:
        return None
    con, meta = opened
    if meta.get("format") == FORMAT_VERSION:
        if meta.get("stat") == skey:
            return con, meta
        if meta.get("content") == content_key(inputs):
            _refresh_stat_key(target, skey)
            return con, {**meta, "stat": skey}
    con.close()
    return None


def _in_memory(root: Path, meta: dict[str, str]) -> Catalog:
    con = sqlite3.connect(MEMORY)
    _fill(con, root, meta)
    return Catalog(con, {**meta, "root": str(root), "where": MEMORY}, root=root)
