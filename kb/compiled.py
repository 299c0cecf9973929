"""The compiled record cache: validated records as JSON in one SQLite file.

``kb show`` must answer in tens of milliseconds, so it must not parse and validate
every YAML file.  The first call after any change of the records (or of the code that
validates them) runs the full store, then writes this cache atomically (temp file +
rename); later calls only ``stat`` the tree and read one row.  Nothing here imports
pydantic or PyYAML unless a rebuild is needed.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kb.paths import PACKAGE_DIR, cache_dir, records_dir

try:  # the builtin module avoids importing OpenSSL through hashlib (a few ms per call)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - every CPython has _blake2
    from hashlib import blake2b

FORMAT_VERSION = "3"
#: Code whose change must invalidate the cache (it decides what a valid record is).
_CODE_FILES = ("models.py", "vocab.py", "store.py", "compiled.py", "releases.py",
               "data/releases.json")  # fmt: skip


class StoreInvalid(Exception):
    """The records do not validate; ``problems`` says where."""

    def __init__(self, problems: list[Any]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the records")
        self.problems = problems


def _walk(root: Path) -> Iterator[os.DirEntry[str]]:
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.name.endswith((".yaml", ".yml")):
                    yield entry


def fingerprint(root: Path) -> str:
    """Cheap identity of the record tree and validating code: paths, sizes, mtimes."""
    h = blake2b(digest_size=16)
    h.update(FORMAT_VERSION.encode())
    h.update(str(root).encode())
    entries = sorted(_walk(root), key=lambda e: e.path) if root.is_dir() else []
    for e in entries:
        st = e.stat()
        h.update(f"{e.path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for name in _CODE_FILES:
        st = (PACKAGE_DIR / name).stat()
        h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def content_hash(root: Path) -> str:
    """Identity of the records' *content* (keys the search index)."""
    h = blake2b(digest_size=16)
    h.update(FORMAT_VERSION.encode())
    for path in sorted(root.rglob("*.y*ml")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    for name in _CODE_FILES:
        h.update((PACKAGE_DIR / name).read_bytes())
    return h.hexdigest()


def db_path(root: Path) -> Path:
    key = blake2b(str(root).encode(), digest_size=8).hexdigest()
    return cache_dir() / f"records-{key}.sqlite"


def build(root: Path, target: Path, fp: str) -> None:
    """Validate everything and write the cache; raise StoreInvalid on any problem."""
    from kb.store import load_store

    result = load_store(root)
    if result.problems:
        raise StoreInvalid(result.problems)
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".records-", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        con = sqlite3.connect(tmp)
        con.executescript(
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
            CREATE TABLE records (name TEXT PRIMARY KEY, kind TEXT, category TEXT,
                                  status TEXT, file TEXT, body TEXT);
            CREATE TABLE names (spelling TEXT PRIMARY KEY, name TEXT);
            """
        )
        from kb.releases import enrich

        rows = []
        for name, loaded in sorted(result.records.items()):
            rec = loaded.record
            body = rec.model_dump(mode="json", by_alias=True)
            enrich(body)  # torch_npu release facts, unless the record states its own
            rows.append((name, body["kind"], body.get("category") or body.get("module"),
                         body.get("status", ""), loaded.file,
                         json.dumps(body, ensure_ascii=False)))  # fmt: skip
        con.executemany("INSERT INTO records VALUES (?,?,?,?,?,?)", rows)
        con.executemany("INSERT INTO names VALUES (?,?)", sorted(result.names.items()))
        meta = {"fingerprint": fp, "content": content_hash(root), "root": str(root)}
        con.executemany("INSERT INTO meta VALUES (?,?)", meta.items())
        con.commit()
        con.close()
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class Catalog:
    """Read-only view of the compiled records."""

    def __init__(self, con: sqlite3.Connection, root: Path) -> None:
        self._con = con
        self.root = root
        self._meta = dict(con.execute("SELECT key, value FROM meta"))

    @property
    def content(self) -> str:
        return self._meta["content"]

    def resolve(self, spelling: str) -> str | None:
        """Record name for a spelling: exact, call path, alias or case-insensitive."""
        row = self._con.execute("SELECT name FROM names WHERE spelling = ?", (spelling,)).fetchone()
        if row:
            return str(row[0])
        stripped = spelling.strip()
        for prefix in ("torch_npu.", "torch.ops.npu.", "torch.npu.", "torch.ops.atb."):
            if stripped.startswith(prefix):
                stripped = stripped[len(prefix) :]
        row = self._con.execute(
            "SELECT name FROM names WHERE spelling = ? COLLATE NOCASE", (stripped,)
        ).fetchone()
        return str(row[0]) if row else None

    def get(self, spelling: str) -> dict[str, Any] | None:
        name = self.resolve(spelling)
        if name is None:
            return None
        row = self._con.execute("SELECT body FROM records WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def file_of(self, name: str) -> str | None:
        row = self._con.execute("SELECT file FROM records WHERE name = ?", (name,)).fetchone()
        return str(row[0]) if row else None

    def spellings(self) -> list[str]:
        return [r[0] for r in self._con.execute("SELECT spelling FROM names")]

    def names(self, kind: str | None = None) -> list[str]:
        if kind:
            q = self._con.execute("SELECT name FROM records WHERE kind = ? ORDER BY name", (kind,))
        else:
            q = self._con.execute("SELECT name FROM records ORDER BY name")
        return [r[0] for r in q]

    def records(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        if kind:
            q = self._con.execute("SELECT body FROM records WHERE kind = ? ORDER BY name", (kind,))
        else:
            q = self._con.execute("SELECT body FROM records ORDER BY kind, name")
        for (body,) in q:
            yield json.loads(body)


def open_catalog(root: Path | None = None, *, rebuild: bool = False) -> Catalog:
    """The compiled catalog for ``root``, rebuilt first when stale, corrupt or asked."""
    root = (root or records_dir()).resolve()
    target = db_path(root)
    fp = fingerprint(root)
    if not rebuild and target.exists():
        try:
            con = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
            row = con.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
            if row and row[0] == fp:
                return Catalog(con, root)
            con.close()
        except sqlite3.DatabaseError:
            pass  # corrupt: rebuild below
    build(root, target, fp)
    return Catalog(sqlite3.connect(f"file:{target}?mode=ro", uri=True), root)
