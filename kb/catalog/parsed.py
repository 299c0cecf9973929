"""Parsed record files reused by their bytes: a one-record edit parses one file.

Compiling the catalog validates every record after any change, and parsing the YAML
(with positions) is most of that.  What a file parses to depends only on its bytes and
on the parser, so the data of each file that parsed is kept here, keyed by the digest
of its bytes and of the parser's code (the ``kb.core`` layer, the PyYAML version and
loader); everything after the parse (the models, the cross-record checks) runs as
before.  A restored document has no node graph: it keeps its text and composes it only
when a problem needs a position (:class:`kb.core.yamlpos.Located`).

Only data that survives JSON unchanged is kept (a date, a tuple or an integer key would
not, so such a file is parsed every time).  Each entry carries the digest of what it
holds and is checked on load; an unreadable, corrupt or unwritable store costs only
the parsing.  Entries no load asked for are dropped when a load stores new ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

from kb.core import yamlpos
from kb.core.paths import PACKAGE_DIR, cache_dir

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - every CPython has _blake2
    from hashlib import blake2b

#: Bump when what an entry holds (or how it is keyed) changes.
VERSION = "1"
#: The layer the parser lives in (the architecture test keeps it from importing above).
PARSER_LAYER = "core"


def _digest(*parts: bytes) -> str:
    h = blake2b(digest_size=16)
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def parser_key(package: Path = PACKAGE_DIR) -> str:
    """The parser's identity: every file of its layer, the YAML library and its loader."""
    import yaml

    parts = [VERSION.encode(), yaml.__version__.encode(), yamlpos._Loader.__name__.encode()]
    layer = package / PARSER_LAYER
    for path in sorted(layer.rglob("*.py")):
        parts += [path.relative_to(layer).as_posix().encode(), path.read_bytes()]
    return _digest(*parts)


def checks_key(package: Path = PACKAGE_DIR) -> bytes:
    """The code that decides whether a parsed record passes its own checks: every file
    of the layers the catalog may import, and their data (what keys the compiled
    catalog too)."""
    from kb.catalog.codekey import code_inputs

    parts = [VERSION.encode()]
    for rel, path in code_inputs(package):
        parts += [rel.encode("utf-8", "surrogateescape"), Path(path).read_bytes()]
    return _digest(*parts).encode()


class ParsedFiles:
    """One load's view of the stored parses: what it found, what it parsed anew."""

    def __init__(self, root: Path) -> None:
        name = blake2b(str(root).encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
        self.path = cache_dir() / f"parsed-{name}.sqlite"
        self.base = b""
        self.used: set[str] = set()
        self.new: dict[str, str] = {}
        self.checker = b""  # the checking code's key (checks_key), set by the caller
        self.checks: set[str] = set()
        self.new_checks: set[str] = set()
        self._con: sqlite3.Connection | None = None
        with contextlib.suppress(OSError):
            self.base = parser_key().encode()
            self._open()

    def _open(self) -> None:
        from kb.core.cache import open_store

        schema = (
            "CREATE TABLE IF NOT EXISTS parsed (key TEXT PRIMARY KEY, payload TEXT);"
            "CREATE TABLE IF NOT EXISTS checked (key TEXT PRIMARY KEY);"
        )
        self._con = open_store(self.path, schema, timeout=2)

    def key(self, raw: bytes) -> str:
        return _digest(self.base, raw)

    def located(self, raw: bytes) -> yamlpos.Located | None:
        """The stored parse of ``raw``, or None (never stored, or damaged)."""
        if self._con is None or not self.base:
            return None
        key = self.key(raw)
        try:
            row = self._con.execute("SELECT payload FROM parsed WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            self._con = None
            return None
        if row is None:
            return None
        try:
            check, _, body = str(row[0]).partition("\n")
            if _digest(body.encode("ascii")) != check:
                return None
            data, spans = json.loads(body)
            text = yamlpos.decode(raw, max_bytes=len(raw))
        except (ValueError, TypeError, UnicodeError, yamlpos.YamlError):
            return None
        self.used.add(key)
        found = [(tuple(a), tuple(b)) for a, b in spans]
        return yamlpos.Located(data=data, hash_spans=found, text=text)  # type: ignore[arg-type]

    def start_checks(self) -> None:
        """Key the records' own checks by the code that runs them (none: unkeyed)."""
        with contextlib.suppress(OSError):
            self.checker = checks_key()

    def passed(self, key: str) -> bool:
        """Did the record whose checks are keyed ``key`` pass them before?"""
        if self._con is None or not self.base or not key:
            return False
        self.checks.add(key)
        try:
            row = self._con.execute("SELECT 1 FROM checked WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            self._con = None
            return False
        return row is not None

    def passes(self, key: str) -> None:
        """Note that the record whose checks are keyed ``key`` passed them."""
        if key and self.base:
            self.checks.add(key)
            self.new_checks.add(key)

    def check_key(self, raw_key: str) -> str:
        """The key of a record's own checks: its bytes' key and the code that checks."""
        if not raw_key or not self.checker:
            return ""
        return _digest(b"checked", raw_key.encode(), self.checker)

    def keep(self, raw: bytes, located: yamlpos.Located) -> None:
        """Store a fresh parse whose data JSON gives back exactly."""
        if self._con is None or not self.base:
            return
        try:
            body = json.dumps([located.data, located.hash_spans])
            if json.loads(body)[0] != located.data:
                return
        except (TypeError, ValueError, RecursionError):
            return
        key = self.key(raw)
        self.used.add(key)
        self.new[key] = _digest(body.encode("ascii")) + "\n" + body

    def close(self) -> None:
        """Write what this load parsed anew (dropping what it did not ask for)."""
        con, self._con = self._con, None
        if con is None:
            return
        try:
            if self.new_checks:
                with con:
                    rows = [(k,) for k in sorted(self.new_checks)]
                    con.executemany("INSERT OR IGNORE INTO checked VALUES (?)", rows)
                    con.execute("CREATE TEMP TABLE seen (key TEXT PRIMARY KEY)")
                    con.executemany(
                        "INSERT OR IGNORE INTO seen VALUES (?)", [(k,) for k in self.checks]
                    )
                    con.execute("DELETE FROM checked WHERE key NOT IN (SELECT key FROM seen)")
            if self.new:
                with con:
                    con.executemany("INSERT OR REPLACE INTO parsed VALUES (?, ?)", self.new.items())
                    kept = list(self.used)
                    con.execute("CREATE TEMP TABLE used (key TEXT PRIMARY KEY)")
                    con.executemany("INSERT OR IGNORE INTO used VALUES (?)", [(k,) for k in kept])
                    con.execute("DELETE FROM parsed WHERE key NOT IN (SELECT key FROM used)")
        except sqlite3.OperationalError:  # busy (another load writes), full disk: not kept
            pass
        except sqlite3.DatabaseError:  # damaged: the next load starts a new one
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        finally:
            with contextlib.suppress(sqlite3.Error):
                con.close()
