"""Where records live, where derived artefacts are cached, and how input files are read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def records_dir() -> Path:
    """The record tree: ``KB_RECORDS_DIR`` when set (tests, contributors), else shipped."""
    override = os.environ.get("KB_RECORDS_DIR")
    return Path(override).resolve() if override else PACKAGE_DIR / "records"


def cache_dir() -> Path:
    """Per-user cache: ``KB_CACHE_DIR``, else the platform's user cache dir for ``kb``
    (``$XDG_CACHE_HOME/kb`` or ``~/.cache/kb`` on Linux)."""
    override = os.environ.get("KB_CACHE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("kb", appauthor=False))


_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link"}  # fmt: skip


class NotRegularFile(OSError):
    """A path that is not a regular file; ``kind`` says what it is instead."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.kind = kind


def file_kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file.

    A FIFO, device or socket is refused from its ``stat`` before ``open``, which could
    block forever; ``O_NONBLOCK`` covers a path swapped for a FIFO in between.
    Raises NotRegularFile or the OSError of the failing call.
    """
    name = os.fspath(path)
    mode = os.stat(name).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(str(name), file_kind(mode))
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(str(name), file_kind(mode))
        return fh.read(limit)
