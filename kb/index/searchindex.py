"""The search index's life on disk: where it lives, how it is built, opened and healed.

One index per record tree and content, in ``index-<version>-<tree>-<content>`` under
the cache directory.  It is built under the tree's lock in a private temp dir, marked
as kb's, and renamed into place; a reader never sees half an index, concurrent cold
searches build it once, and a second record tree sharing the cache keeps its own.
Old indexes of the same tree are removed after a build, and only when they carry kb's
marker.  The stamp holds a CRC-32 of every index file, verified on each open of the
files that open reads (a query reads ``docs.json`` and ``terms.sqlite``, not whoosh's
4.5 MB segment; CRC-32 is made to catch accidental damage, and nothing here guards
against a writer who could as well rewrite the stamp), so bit rot cannot quietly change
the answers.  The stored fields the
ranking reads are also written as ``docs.json`` beside the segments (checked alike),
which loads in a third of the time whoosh takes to unpickle them, and every term's
scores as ``terms.sqlite`` (:mod:`kb.index.termtable`), so a query needs no whoosh.  An index that fails to open
or to verify, disagrees with the catalog or breaks during a query is rebuilt, never
trusted; when the cache cannot be written it is built in
memory for this process.  What goes *into* the index (documents, field weights,
priors) is :mod:`kb.index.documents`' and :mod:`kb.index.priors`' business.
"""

from __future__ import annotations

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

INDEX_VERSION = "15"
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
    """The files the index is read from (whoosh's segments and table of contents, and
    ``docs.json``): all but the stamp, kb's marker and whoosh's lock."""
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
            return None  # a file the build did not write (another TOC) is not trusted
        for name, digest in files.items():
            if (reads is None or name in reads) and _crc(target / name) != digest:
                return None
        stored = {int(k): v for k, v in json.loads(_read(target / DOCS)).items()}
        # every file is byte for byte what the build wrote, so whoosh's own count (a
        # second read of its segment) would add nothing
        return stored if len(stored) == stamp["docs"] else None
    except Exception:  # any damage (missing, not a directory, garbage): not trusted
        return None


def _open_valid(target: Path, catalog: Catalog) -> Any:
    """The whoosh index at ``target`` when it verifies, else None."""
    stored = _verified(target, catalog)
    if stored is None:
        return None
    try:
        from kb.index.whoosh_import import import_whoosh

        import_whoosh()
        from whoosh.filedb.filestore import FileStorage

        # read, never mapped: a segment cut short under a mapping kills the process
        # with SIGBUS when the lost pages are touched; a short read is an exception
        ix = FileStorage(str(target), supports_mmap=False).open_index()
    except Exception:  # damage whoosh finds that the checksums could not: not trusted
        return None
    setattr(ix, STORED_ATTR, stored)
    return ix


def open_terms(catalog: Catalog) -> TermTable | None:
    """The term table of the catalog's index when one on disk verifies (None: build
    the index, or search through whoosh when it lives in memory)."""
    if catalog.in_memory:
        return None
    target = index_dir(catalog)
    # a query reads these two; whoosh's 4.5 MB segment is checked where whoosh opens it
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


def _write_docs(ix: Any, directory: Path) -> None:
    """``docs.json``: the stored fields whoosh holds, as the ranking reads them, with
    each record's name parts (stemming them is a cold query's largest own cost)."""
    from kb.index.names import name_parts

    with ix.reader() as reader:
        stored = {
            docnum: {**fields, "parts": name_parts(fields["name"])}
            for docnum, fields in reader.iter_docs()
        }
    (directory / DOCS).write_text(
        json.dumps(stored, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
    )


def _in_memory(catalog: Catalog) -> Any:
    from kb.index.whoosh_import import import_whoosh

    import_whoosh()
    from whoosh.filedb.filestore import RamStorage

    from kb.index.documents import schema  # imports whoosh

    ix = RamStorage().create_index(schema())
    _fill(ix, catalog)
    return ix


def open_index(catalog: Catalog, *, rebuild: bool = False) -> Any:
    """Open the index for the catalog, building it when missing, stale, corrupt or asked."""
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
    from kb.index.whoosh_import import import_whoosh

    import_whoosh()
    from whoosh import index as windex

    from kb.index.documents import schema

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
                ix = windex.create_in(str(built), schema())
                recorder = _fill(ix, catalog)
                from kb.core.gcpause import collector_paused

                with collector_paused():  # scoring every term makes no cycles either
                    _write_docs(ix, built)
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
