"""Build outputs the site reuses by content hash: rule-example reports, the CLI
reference and kb's search index for the site.

Running ~60 rule examples (``kb check`` or ``kb scan`` on each failing snippet) and
formatting ``kb --help`` for every verb cost every build, though a record edit changes
neither unless an example reads that record; the search index (every term's score per
record, computed by whoosh) took ~20 s of each build.  Each output is stored in kb's cache
directory with what it was made from: the code version (every file of the kb package
outside its records, the site plugin's modules, the Python version), the snippet, and
for an example what it read of the records, logged through :class:`ReadLog` (of each record
got by name and of each kind iterated the fields read, each name list) and compared by
digest on the next build.  So a one-word edit of one record reruns only the examples
that read that field of that record, or of every record.

Files are written like the search index's: under a lock, into a marked temp dir, then
renamed into place; each carries a digest of its payload, checked on load.  A missing,
stale, corrupt or unwritable cache only costs the recomputation.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from kb.catalog.compiled import root_key
from kb.core import cache
from kb.core.paths import PACKAGE_DIR, cache_dir

try:  # the builtin module avoids importing OpenSSL through hashlib
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - every CPython has _blake2
    from hashlib import blake2b

#: Bump when what an entry holds (or how it is keyed) changes.
CACHE_VERSION = "1"
SITE_PLUGINS_DIR = Path(__file__).resolve().parent

#: (what was asked: get | get-fields | names | records | fields | all, of what)
Read = tuple[str, str]


def digest(*parts: str) -> str:
    h = blake2b(digest_size=16)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of the code that makes the outputs: kb's own files outside its records
    (modules and data such as the release table), the site plugin's modules, Python."""
    h = blake2b(digest_size=16)
    h.update(sys.version.encode())
    for base, pattern in ((PACKAGE_DIR, "**/*"), (SITE_PLUGINS_DIR, "**/*.py")):
        for path in sorted(base.glob(pattern)):
            rel = path.relative_to(base).as_posix()
            if rel.startswith("records/") or "__pycache__" in rel or not path.is_file():
                continue
            h.update(f"{base.name}/{rel}\0".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


class _Usage:
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.whole = False


class _Fields(dict):  # type: ignore[type-arg]
    """A record body that notes the fields read by name; any other use (iteration,
    length, comparison, copying, printing, mutation) counts as reading all of it."""

    def __init__(self, body: dict[str, Any], usage: _Usage) -> None:
        super().__init__(body)
        self._usage = usage

    def __getitem__(self, key: str) -> Any:
        self._usage.names.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._usage.names.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._usage.names.add(str(key))
        return super().__contains__(key)

    def __bool__(self) -> bool:
        # not a read of any field: a record body always has its name, which every
        # digest of what was read of it includes
        return dict.__len__(self) > 0


def _reads_whole(name: str) -> Callable[..., Any]:
    base = getattr(dict, name)

    def method(self: _Fields, *args: Any, **kwargs: Any) -> Any:
        self._usage.whole = True
        return base(self, *args, **kwargs)

    return method


for _name in (
    "__iter__",
    "__len__",
    "__eq__",
    "__ne__",
    "__repr__",
    "__or__",
    "__ror__",
    "__ior__",
    "__reversed__",
    "__reduce__",
    "__reduce_ex__",
    "__setitem__",
    "__delitem__",
    "keys",
    "items",
    "values",
    "copy",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "clear",
):
    setattr(_Fields, _name, _reads_whole(_name))


class ReadLog:
    """A catalog that notes what is read from it: what an example's output depends on.

    Records are reached through ``get``, ``names`` and ``records``; any other attribute
    is noted as a read of the whole catalog, so a new way in can only cost reuse.
    """

    def __init__(self, catalog: Any) -> None:
        self._catalog = catalog
        self._reads: set[Read] = set()
        #: Per kind iterated: the fields read of its records (or that all were).
        self.fields: dict[str, _Usage] = {}
        #: Per record got by name: the fields read of it (or that all were).
        self.gets: dict[str, _Usage] = {}

    @property
    def reads(self) -> set[Read]:
        """What was read; an iterated kind as ``records`` (whole bodies) or
        ``fields`` (the named top-level fields of every record of the kind)."""
        out = set(self._reads)
        for spelling, usage in self.gets.items():
            if usage.whole:
                out.add(("get", spelling))
            else:
                out.add(("get-fields", _json([spelling, sorted(usage.names)])))
        for kind, usage in self.fields.items():
            if usage.whole:
                out.add(("records", kind))
            else:
                out.add(("fields", _json([kind, sorted(usage.names)])))
        return out

    def get(self, spelling: str) -> dict[str, Any] | None:
        """The record ``spelling`` names, noting which of its fields are read (a check
        that reads an operator's signature does not rerun when its description changes)."""
        body = self._catalog.get(spelling)
        if body is None:
            self._reads.add(("get", spelling))
            return None
        return _Fields(body, self.gets.setdefault(spelling, _Usage()))

    def names(self, kind: str | None = None) -> list[str]:
        self._reads.add(("names", kind or ""))
        return self._catalog.names(kind)  # type: ignore[no-any-return]

    def records(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        """Every record of ``kind``, each noting which of its fields are read."""
        usage = self.fields.setdefault(kind or "", _Usage())
        for rec in self._catalog.records(kind):
            yield _Fields(rec, usage)

    def __getattr__(self, name: str) -> Any:
        if name == "content":
            # the identity of every record: a reader keys a process memo on it (kb check's
            # fitting chains), whose hit would hide the reads behind it; without it the
            # reader computes afresh through this log, which notes what that reads
            raise AttributeError(name)
        self._reads.add(("all", ""))
        return getattr(self._catalog, name)


class ReadDigests:
    """The digest of each read against the current catalog, computed once per build."""

    def __init__(self, catalog: Any, records: Iterable[dict[str, Any]] | None = None) -> None:
        """``records``: every body of ``catalog`` as it gives them, when already decoded."""
        self.catalog = catalog
        self._done: dict[Read, str] = {}
        self._bodies: dict[str, list[dict[str, Any]]] = {}
        if records is not None:
            every = sorted(records, key=lambda r: (str(r.get("kind")), str(r.get("name"))))
            self._bodies[""] = every
            for rec in every:
                self._bodies.setdefault(str(rec.get("kind")), []).append(rec)
        self._row_digests: dict[str, str] | None = None

    def _records(self, kind: str) -> list[dict[str, Any]]:
        """Every body of ``kind`` ("": all), read from the catalog once per build (the
        examples ask for a few dozen different field sets of the same records)."""
        if kind not in self._bodies:
            self._bodies[kind] = (
                [] if "" in self._bodies else list(self.catalog.records(kind or None))
            )
        return self._bodies[kind]

    def __call__(self, read: Read) -> str:
        if read not in self._done:
            what, arg = read
            if what == "get":
                value: object = self.catalog.get(arg)
            elif what == "get-fields":
                spelling, names = json.loads(arg)
                body = self.catalog.get(spelling)
                value = None
                if body is not None:
                    value = [body.get("name"), {n: body[n] for n in names if n in body}]
            elif what == "names":
                value = self.catalog.names(arg or None)
            elif what == "records":  # every body of a kind: their row digests say as much
                if self._row_digests is None:
                    self._row_digests = self.catalog.digests()
                digests = self._row_digests
                value = [[n, digests.get(n)] for n in self.catalog.names(arg or None)]
            elif what == "fields":
                kind, names = json.loads(arg)
                value = [
                    [rec.get("name"), {n: rec[n] for n in names if n in rec}]
                    for rec in self._records(kind)
                ]
            else:
                value = self.catalog.content
            self._done[read] = digest(_json(value))
        return self._done[read]

    def of(self, reads: Iterable[Read]) -> list[list[str]]:
        return [[what, arg, self((what, arg))] for what, arg in sorted(reads)]

    def still(self, stored: object) -> bool:
        """Do the reads an entry stored still give what they gave?"""
        if not isinstance(stored, list):
            return False
        try:
            return all(self((what, arg)) == was for what, arg, was in stored)
        except (TypeError, ValueError):
            return False


# -- the files -------------------------------------------------------------------------


def _path(name: str) -> Path:
    return cache_dir() / f"site-{CACHE_VERSION}-{name}.json"


def load(name: str) -> dict[str, Any]:
    """A stored payload, or {} when missing, unreadable or failing its digest."""
    try:
        stored = json.loads(_path(name).read_text(encoding="utf-8"))
        payload = stored["payload"]
        if not isinstance(payload, dict) or stored.get("digest") != digest(_json(payload)):
            return {}
        return payload
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def store(name: str, payload: dict[str, Any]) -> None:
    """Replace a stored payload atomically; a cache that cannot be written is skipped."""
    with contextlib.suppress(cache.CacheUnavailable, OSError):
        directory = cache.usable_dir()
        tag = f"site-{name}"
        with cache.locked(directory, tag):
            cache.clean_stale(directory, tag)
            tmp = cache.private_tmpdir(directory, tag)
            try:
                built = tmp / "payload.json"
                text = _json({"payload": payload, "digest": digest(_json(payload))})
                built.write_text(text, encoding="utf-8")
                os.replace(built, _path(name))
            finally:
                cache.remove_owned(tmp)


# -- the outputs -----------------------------------------------------------------------


def examples_name(catalog: Any) -> str:
    """One file of example reports per record tree (trees read different records)."""
    return f"examples-{root_key(Path(catalog.root))}"


def example_key(code: str, front: str, snippet: str) -> str:
    return digest(code_version(), code, front, snippet)


def cli_reference(render: Callable[[], str]) -> str:
    """``render()`` (the kb parser's help), reused while the code is the same."""
    key = code_version()
    stored = load("cli")
    if stored.get("key") == key and isinstance(stored.get("text"), str):
        return str(stored["text"])
    text = render()
    store("cli", {"key": key, "text": text})
    return text


def search_files(catalog: Any, inputs: str, render: Callable[[], dict[str, str]]) -> dict[str, str]:
    """``render()`` (the site's search index files), reused while the code, the records
    (the catalog's content key) and ``inputs`` (what else the index is made from: page
    URLs and the other pages' titles) are the same.  One entry per record tree."""
    key = digest(
        code_version(),
        _versions("whoosh-reloaded", "whoosh", "jieba"),
        str(catalog.content),
        inputs,
    )
    name = f"search-{root_key(Path(catalog.root))}"
    stored = load(name)
    files = stored.get("files")
    if (
        stored.get("key") == key
        and isinstance(files, dict)
        and all(isinstance(v, str) for v in files.values())
    ):
        return {str(k): v for k, v in files.items()}
    files = render()
    store(name, {"key": key, "files": files})
    return files


def _versions(*distributions: str) -> str:
    """Installed versions of the libraries an output is computed with."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for dist in distributions:
        try:
            out.append(f"{dist}={version(dist)}")
        except PackageNotFoundError:
            out.append(f"{dist}=none")
    return ",".join(out)
