"""Where records live, where derived artefacts are cached, and how input files are read."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def records_dir() -> Path:
    """The record tree: ``KB_RECORDS_DIR`` when set (tests, contributors), else shipped."""
    override = os.environ.get("KB_RECORDS_DIR")
    return Path(override).resolve() if override else PACKAGE_DIR / "records"


def is_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8: a path or argument holding bytes that are not
    UTF-8 comes into Python with lone surrogates (``surrogateescape``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def cache_dir() -> Path:
    """Per-user cache: ``KB_CACHE_DIR``, else the platform's user cache dir for ``kb``
    (``$XDG_CACHE_HOME/kb`` or ``~/.cache/kb`` on Linux)."""
    override = os.environ.get("KB_CACHE_DIR")
    if override:
        return Path(override)
    plain = _xdg_cache() if sys.platform.startswith("linux") else None
    if plain is not None:
        return plain
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("kb", appauthor=False))


def _xdg_cache() -> Path | None:
    """``$XDG_CACHE_HOME/kb`` (an absolute path, as the XDG base-directory spec wants),
    else ``$HOME/.cache/kb`` with an absolute ``HOME``: what platformdirs answers on Linux
    in these plain cases, without importing it on every cold command (a sixth of a cold
    search).  None for anything else (platformdirs decides)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "kb"
    if xdg.strip():
        return None  # a relative XDG_CACHE_HOME: platformdirs' own rule applies
    home = os.environ.get("HOME", "")
    return Path(home) / ".cache" / "kb" if os.path.isabs(home) else None


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


class NotRegularFile(OSError):
    """A path that is not a regular file; ``kind`` says what it is instead."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.kind = kind


def file_kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


class OutsideRoot(PermissionError):
    """The file actually opened lies outside the directory reads are confined to."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is outside the directory kb may read")


#: Set by a server that must read only below one directory (``kb mcp --root``).
_CONFINED_TO: str | None = None


def confine_reads(top: str | None) -> None:
    """From now on every input read (not the records) must open a file below ``top``
    (already resolved), judged on the file descriptor after ``open``: a symlink swapped
    in between a path check and the open cannot lead the reader out."""
    global _CONFINED_TO
    _CONFINED_TO = top


def _opened_path(fd: int, name: str) -> str:
    """Where ``fd`` really points: the kernel's own answer on Linux, else ``realpath``."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(name)


def _check_confined(fd: int, name: str) -> None:
    top = _CONFINED_TO
    if top is None:
        return
    real = _opened_path(fd, name)
    try:
        inside = os.path.commonpath([real, top]) == top
    except ValueError:
        inside = False
    if not inside:
        raise OutsideRoot(name)


#: Files read as input since :func:`record_reads` (``(st_dev, st_ino)`` -> the path as
#: opened), so an output can refuse to replace any of them; ``None``: not recording.
_READS: dict[tuple[int, int], str] | None = None


def record_reads() -> None:
    """From now on remember every input file :func:`read_regular_file` opens (a forked
    worker inherits the setting and hands its own back through :func:`note_reads`)."""
    global _READS
    if _READS is None:
        _READS = {}


def files_read() -> dict[tuple[int, int], str]:
    """The files read since :func:`record_reads`, by device and inode (every spelling of
    a file, a symlink or a hard link to it, is the same key)."""
    return dict(_READS or {})


def note_reads(reads: dict[tuple[int, int], str]) -> None:
    """Add what another process (a scan worker) read."""
    if _READS is not None:
        _READS.update(reads)


def read_regular_file(path: str | os.PathLike[str], limit: int, *, confined: bool = True) -> bytes:
    """At most ``limit`` bytes of a regular file.

    A FIFO, device or socket is refused from its ``stat`` before ``open``, which could
    block forever; ``O_NONBLOCK`` covers a path swapped for a FIFO in between.  Under
    :func:`confine_reads` the opened descriptor must lie inside the root (``confined=False``
    only for kb's own record files).  Raises NotRegularFile, OutsideRoot or the OSError
    of the failing call.
    """
    name = os.fspath(path)
    mode = os.stat(name).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(str(name), file_kind(mode))
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        if confined:
            _check_confined(fd, name)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(str(name), file_kind(st.st_mode))
        if _READS is not None and confined:
            _READS.setdefault((st.st_dev, st.st_ino), str(name))
        return fh.read(limit)


class FileTooLarge(OSError):
    """A side file (configuration, ignore file) over its size cap."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(f"{path} is {size} bytes or more, larger than the {limit} byte limit")
        self.size = size
        self.limit = limit


class NotText(ValueError):
    """Bytes that are not text in the expected encoding; the message names the place."""


#: The cap for small files kb reads beside its main inputs (pyproject.toml, .gitignore).
SIDE_FILE_BYTES = 1024 * 1024


def read_capped(path: str | os.PathLike[str], limit: int = SIDE_FILE_BYTES) -> bytes:
    """All of a regular file of at most ``limit`` bytes; FileTooLarge past the cap.

    The size is judged from ``stat`` first (a sparse 1 GB file costs nothing) and
    again from what was read (a file that grew, or a /proc file reporting size 0).
    """
    name = os.fspath(path)
    st = os.stat(name)
    if stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise FileTooLarge(str(name), st.st_size, limit)
    raw = read_regular_file(name, limit + 1)
    if len(raw) > limit:
        raise FileTooLarge(str(name), len(raw), limit)
    return raw


def decode_utf8(raw: bytes, path: str | os.PathLike[str]) -> str:
    """UTF-8 text (a BOM dropped); NotText names the path, line and byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise NotText(f"{os.fspath(path)}:{line}: not UTF-8 text (byte {exc.start})") from None


def read_side_text(path: str | os.PathLike[str], limit: int = SIDE_FILE_BYTES) -> str:
    """A small UTF-8 file kb reads beside its inputs: regular, non-blocking, capped.

    Raises NotRegularFile, FileTooLarge or another OSError, or NotText.
    """
    return decode_utf8(read_capped(path, limit), path)


def describe_os_error(exc: OSError) -> str:
    """The reason of a failed read, without repeating the path of subclasses above."""
    if isinstance(exc, NotRegularFile):
        return f"is {exc.kind}, not a regular file"
    if isinstance(exc, FileTooLarge):
        return f"is {exc.size} bytes or more, larger than the {exc.limit} byte limit"
    if isinstance(exc, OutsideRoot):
        return "is outside the directory kb may read"
    return f"cannot read: {exc.strerror or exc}"
