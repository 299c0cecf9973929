"""The search index's life on disk: where it lives, how it is built, opened and healed.

One index per record tree and content, in ``index-<version>-<tree>-<content>`` under
the cache directory: the stored fields the ranking reads (``docs.json``) and every
term's scores (``terms.sqlite``, :mod:`kb.index.termtable`).  No whoosh segment is
written: a query needs none, and writing whoosh's postings was most of a build's time.
A caller that asks for a whoosh searcher of an index on disk (:class:`DiskIndex`) gets
one built in memory from the same records, on first use.  It is built under the tree's lock in a private temp dir, marked
as kb's, and renamed into place; a reader never sees half an index, concurrent cold
searches build it once, and a second record tree sharing the cache keeps its own.
Old indexes of the same tree are removed after a build, and only when they carry kb's
marker.  The stamp holds a CRC-32 of every index file, verified on each open of the
files that open reads (CRC-32 is made to catch accidental damage, and nothing here
guards against a writer who could as well rewrite the stamp), so bit rot cannot quietly
change the answers.  An index that fails to open
or to verify, disagrees with the catalog or breaks during a query is rebuilt, never
trusted; when the cache cannot be written it is built in
memory for this process.  What goes *into* the index (documents, field weights,
priors) is :mod:`kb.index.documents`' and :mod:`kb.index.priors`' business.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import zlib
from pathlib import Path
from typing import Any

from kb.catalog.compiled import Catalog, root_key
from kb.core import cache
from kb.core.paths import cache_dir
from kb.index import termtable
from kb.index.termtable import TermTable

INDEX_VERSION = "17"
_INDEX_NAME = re.compile(r"^index-(\d+)-([0-9a-f]{16})-([0-9a-f]{32})$")
STAMP = "stamp.json"
#: The stored fields of every document, by document number, for the ranking to read.
DOCS = "docs.json"
#: The attribute of an opened index that carries those fields (None: read whoosh's).
STORED_ATTR = "kb_stored"
#: Every term's scores (:mod:`kb.index.termtable`): what a cold query reads.
TERMS = termtable.FILE


def index_dir(catalog: Catalog) -> Path:
    return cache_dir() / f"index-{INDEX_VERSION}-{root_key(catalog.root)}-{catalog.content}"


def _stamp(catalog: Catalog) -> dict[str, Any]:
    return {"content": catalog.content, "docs": catalog.count(), "root": str(catalog.root)}


def _crc(path: Path) -> str:
    """CRC-32 and size of a file's bytes, read in chunks into one buffer."""
    crc, size = 0, 0
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    # O_NONBLOCK and the check on the descriptor: a FIFO swapped in is refused, never
    # waited on (an open for reading blocks until a writer comes)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb", buffering=0) as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        while n := fh.readinto(buf):
            crc = zlib.crc32(view[:n], crc)
            size += n
    return f"{size}:{crc:08x}"


#: Larger than any index file kb writes (the term table is a few MB).
MAX_INDEX_FILE = 1 << 30


def _read(path: Path) -> bytes:
    """A regular file's bytes; a FIFO or device in its place is an error, not a wait."""
    from kb.core.paths import read_regular_file

    return read_regular_file(path, MAX_INDEX_FILE, confined=False)


def _index_files(directory: Path) -> set[str]:
    """The files the index is read from (``docs.json``, ``terms.sqlite``): all but the
    stamp, kb's marker and a lock whoosh may have left."""
    return {
        name
        for name in os.listdir(directory)
        if name not in (STAMP, cache.MARKER) and not name.endswith("WRITELOCK")
    }


def _checksums(directory: Path) -> dict[str, str]:
    """Size and CRC-32 of every index file."""
    return {name: _crc(directory / name) for name in sorted(_index_files(directory))}


def _verified(
    target: Path, catalog: Catalog, *, reads: frozenset[str] | None = None
) -> dict[int, dict[str, Any]] | None:
    """The stored fields of the index at ``target`` when its stamp matches the catalog
    and its files (or the ones the caller ``reads``) their checksums, else None
    (whoosh-free)."""
    try:
        stamp = json.loads(_read(target / STAMP))
        files = stamp.pop("files", None)
        return _verified_files(target, catalog, stamp, files, reads)
    except Exception:  # any damage (missing, not a directory, garbage): not trusted
        return None


def _verified_files(
    target: Path,
    catalog: Catalog,
    stamp: dict[str, Any],
    files: Any,
    reads: frozenset[str] | None = None,
) -> dict[int, dict[str, Any]] | None:
    try:
        if stamp != _stamp(catalog) or not files:
            return None
        if not {DOCS, TERMS} <= set(files) or _index_files(target) != set(files):
            return None  # a file the build did not write is not trusted
        for name, digest in files.items():
            if (reads is None or name in reads) and _crc(target / name) != digest:
                return None
        stored = {int(k): v for k, v in json.loads(_read(target / DOCS)).items()}
        return stored if len(stored) == stamp["docs"] else None
    except Exception:  # any damage (missing, not a directory, garbage): not trusted
        return None


class DiskIndex:
    """A verified index on disk, as :func:`open_index` returns it: its stored fields
    and size without whoosh; a whoosh searcher (:class:`kb.index.fulltext.Session`)
    only on demand, over an index of the same records built in memory then."""

    def __init__(self, catalog: Catalog, directory: Path, stored: dict[int, dict[str, Any]]):
        self.catalog = catalog
        self.directory = directory
        self.kb_stored = stored  # STORED_ATTR: what Session reads instead of whoosh's
        self._whoosh: Any = None

    def doc_count(self) -> int:
        return len(self.kb_stored)

    def searcher(self, **kwargs: Any) -> Any:
        if self._whoosh is None:
            self._whoosh = _in_memory(self.catalog)
        return self._whoosh.searcher(**kwargs)


def _open_valid(target: Path, catalog: Catalog) -> DiskIndex | None:
    """The index at ``target`` when it verifies, else None (whoosh-free)."""
    stored = _verified(target, catalog)
    return None if stored is None else DiskIndex(catalog, target, stored)


def open_terms(catalog: Catalog) -> TermTable | None:
    """The term table of the catalog's index when one on disk verifies (None: build
    the index, or search through whoosh when it lives in memory)."""
    if catalog.in_memory:
        return None
    target = index_dir(catalog)
    stored = _verified(target, catalog, reads=frozenset({DOCS, TERMS}))
    if stored is None:
        return None
    try:
        table = TermTable(target, stored)
    except Exception:
        return None
    cache.clean_dead()
    return table


def load_terms(catalog: Catalog) -> TermTable | None:
    """The term table of the catalog's index on disk, read into memory and checked
    against the stamp *as read* (None: no index on disk verifies; build one).

    For a long-running process (``kb mcp``): the bytes checked are the bytes used, and
    nothing is left open or mapped, so a cache file truncated or replaced later cannot
    change an answer or kill the process.
    """
    if catalog.in_memory:
        return None
    target = index_dir(catalog)
    try:
        stamp = json.loads(_read(target / STAMP))
        files = stamp.pop("files", None)
        stored = _verified_files(target, catalog, stamp, files)
        if stored is None:
            return None
        data = _read(target / TERMS)
        if f"{len(data)}:{zlib.crc32(data):08x}" != files[TERMS]:
            return None  # changed since it was checked
        try:
            return TermTable.from_bytes(data, stored)
        except AttributeError:  # Python 3.10: no deserialize; sqlite reads, never maps
            return TermTable(target, stored)
    except Exception:  # any damage: not trusted
        return None


def _fill(ix: Any, catalog: Catalog) -> termtable.Recorder:
    from kb.core.gcpause import collector_paused
    from kb.index.documents import document
    from kb.index.priors import priors

    recorder = termtable.Recorder()
    with collector_paused():
        writer = ix.writer()
        recorder.attach(writer)
        try:
            weights = priors(catalog)
            for rec in catalog.records():
                recorder.start()
                writer.add_document(prior=weights.get(rec["name"], 1.0), **document(rec))
        finally:
            recorder.detach(writer)
        writer.commit()
    return recorder


def _analysed(catalog: Catalog) -> tuple[termtable.Recorder, dict[int, dict[str, Any]]]:
    """Every record's text fields analysed and its stored fields, by document number:
    what whoosh's writer would index and store for it (:func:`_fill`), without whoosh's
    postings."""
    from kb.index.documents import document, schema
    from kb.index.names import name_parts
    from kb.index.priors import priors

    fields_of = schema()
    kept = {name for name in fields_of.names() if fields_of[name].stored}
    recorder = termtable.Recorder()
    stored: dict[int, dict[str, Any]] = {}
    weights = priors(catalog)
    for docnum, rec in enumerate(catalog.records()):
        fields: dict[str, Any] = {"prior": weights.get(rec["name"], 1.0), **document(rec)}
        recorder.add(fields)
        # as whoosh stores them: field names sorted, None left out
        one = {k: fields[k] for k in sorted(fields) if k in kept and fields[k] is not None}
        # with the name's parts: stemming them is a cold query's largest own cost
        stored[docnum] = {**one, "parts": name_parts(one["name"])}
    return recorder, stored


def _write_docs(stored: dict[int, dict[str, Any]], directory: Path) -> None:
    """``docs.json``: the stored fields, as the ranking reads them."""
    (directory / DOCS).write_text(
        json.dumps(stored, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
    )


def _in_memory(catalog: Catalog) -> Any:
    from kb.index.whoosh_import import import_whoosh

    import_whoosh()
    from whoosh.filedb.filestore import RamStorage
    from whoosh.util import random_name

    from kb.index.documents import schema  # imports whoosh

    class PrivateScratch(RamStorage):  # type: ignore[misc]
        """whoosh's writer spills to a folder named after the index (``MAIN.tmp`` in the
        system temp dir) and deletes it when done: processes building at once shared it
        and lost each other's files.  Each build gets a folder of its own."""

        def __init__(self) -> None:
            super().__init__()
            self.made: list[Any] = []

        def temp_storage(self, name: str | None = None) -> Any:
            store = super().temp_storage(f"kb-{os.getpid()}-{random_name()}.tmp")
            self.made.append(store)
            return store

    storage = PrivateScratch()
    ix = storage.create_index(schema())
    try:
        _fill(ix, catalog)
    finally:
        for store in storage.made:  # the folders, once the writer is done with them
            with contextlib.suppress(OSError):
                store.destroy()
    return ix


def open_index(catalog: Catalog, *, rebuild: bool = False) -> Any:
    """Open the index for the catalog, building it when missing, stale, corrupt or asked:
    a :class:`DiskIndex`, or a whoosh index in memory when the cache is not usable."""
    if catalog.in_memory:
        return _in_memory(catalog)
    if not rebuild:
        ix = _open_valid(index_dir(catalog), catalog)
        if ix is not None:
            cache.clean_dead()  # leftovers of a killed build, should one have died
            return ix
    return build_index(catalog, force=rebuild)


def build_index(catalog: Catalog, *, force: bool = True) -> Any:
    """Build the catalog's index into place and open it (in memory if the cache fails).

    Without ``force`` an index another process finished while we waited for the lock
    is used as it is.
    """
    from kb.core.gcpause import collector_paused

    target = index_dir(catalog)
    tag = f"{root_key(catalog.root)}-index"
    try:
        directory = cache.usable_dir()
        with cache.locked(directory, tag):
            cache.clean_stale(directory, tag)
            if not force:
                ix = _open_valid(target, catalog)
                if ix is not None:
                    return ix
            tmp = cache.private_tmpdir(directory, tag)
            try:
                built = tmp / "index"
                built.mkdir()
                with collector_paused():  # analysing and scoring make no cycles
                    recorder, stored = _analysed(catalog)
                    _write_docs(stored, built)
                    termtable.write(recorder, built)
                stamp = {**_stamp(catalog), "files": _checksums(built)}
                (built / STAMP).write_text(json.dumps(stamp), encoding="utf-8")
                cache.mark(built, root=str(catalog.root), content=catalog.content)
                _swap_into_place(built, target, tmp)
            finally:
                cache.remove_owned(tmp)
            _remove_older(directory, catalog, target)
    except cache.CacheUnavailable as exc:
        cache.note(f"{exc}; searching without a cached index")
        return _in_memory(catalog)
    except OSError as exc:
        cache.note(
            f"cannot write the search index ({exc.strerror or exc}); searching "
            "without a cached index"
        )
        return _in_memory(catalog)
    ix = _open_valid(target, catalog)
    return ix if ix is not None else _in_memory(catalog)


def _swap_into_place(built: Path, target: Path, tmp: Path) -> None:
    """Rename ``built`` to ``target``; an existing index of ours goes into ``tmp`` first.

    Anything at ``target`` that is not kb's (a file, someone's directory) is left alone.
    """
    if os.path.lexists(target):
        if cache.owned(target) is None:
            raise cache.CacheUnavailable(f"{target} exists and is not kb's")
        os.rename(target, tmp / "replaced")
    os.rename(built, target)


def _remove_older(directory: Path, catalog: Catalog, keep: Path) -> None:
    """Drop this tree's other indexes (older content or version) that kb marked as its own."""
    mine = root_key(catalog.root)
    for entry in directory.glob("index-*"):
        m = _INDEX_NAME.match(entry.name)
        if m and m.group(2) == mine and entry != keep:
            cache.remove_owned(entry)
