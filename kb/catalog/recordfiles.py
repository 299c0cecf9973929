"""Which files under a record tree are records: one walk every reader shares.

Kept free of pydantic and PyYAML: the compiled cache walks the tree on every call
(``kb show``) to prove itself fresh, and must stay in its millisecond budget.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from kb.core.paths import file_kind


class Problem(NamedTuple):
    """One problem with a record file (a NamedTuple: a dataclass would cost every cold
    ``kb show`` and ``kb search`` an import of inspect)."""

    file: str
    line: int
    column: int
    field: str
    message: str

    def __str__(self) -> str:
        return self.located_in(None)

    def located_in(self, root: Path | None) -> str:
        """``file:line:col: field: message``, the file under ``root`` when given.

        Line and column always come last, so a file name with colons (``a:b.yaml``)
        stays readable from the right.
        """
        file = str(root / self.file) if root is not None else self.file
        where = f"{file}:{self.line}:{self.column}"
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


RECORD_SUFFIXES = (".yaml", ".yml")
#: A record file larger than this is not a record (the biggest today is ~40 KB).
MAX_RECORD_BYTES = 1024 * 1024


def discover(root: Path) -> tuple[list[Path], list[Problem]]:
    """The record files under ``root``, sorted, and problems with entries that look like one.

    Every reader of the tree (validation, the compiled cache's freshness check) uses this
    one walk, so they agree on what a record file is.  Hidden entries (``.git``, an
    editor's ``.#name.yaml`` lock link) are skipped; a directory is a directory whatever
    its name; directory symlinks are not followed (no loops); a ``*.yaml`` that is a
    dangling link, a FIFO, a device or a socket is a problem, never opened.
    """
    paths, problems = scan(str(root))
    return [Path(p) for p in paths], problems


def scan(root: str) -> tuple[list[str], list[Problem]]:
    """:func:`discover` on plain strings (the cache checks this on every call: no Path
    objects, no stat call for an ordinary file)."""
    files: list[str] = []
    problems: list[Problem] = []
    cut = len(root.rstrip(os.sep)) + 1
    stack = [root]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except OSError as exc:
            problems.append(
                Problem(
                    here[cut:] or root, 1, 1, "", f"cannot list directory: {exc.strerror or exc}"
                )
            )
            continue
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
                continue
            if not name.endswith(RECORD_SUFFIXES):
                continue
            if entry.is_file(follow_symlinks=False):  # from the directory listing, no stat
                files.append(entry.path)
                continue
            rel = entry.path[cut:]
            try:
                mode = entry.stat(follow_symlinks=True).st_mode
            except OSError:
                target = os.readlink(entry.path) if entry.is_symlink() else "?"
                problems.append(
                    Problem(
                        rel,
                        1,
                        1,
                        "",
                        f"broken symbolic link (to {target!r}); remove it or restore its target",
                    )
                )
                continue
            if stat.S_ISREG(mode):
                files.append(entry.path)
            else:
                problems.append(Problem(rel, 1, 1, "", f"is {file_kind(mode)}, not a record file"))
    files.sort()
    if not files and not problems:
        problems.append(
            Problem(root, 1, 1, "", f"0 records loaded from {root}: no *.yaml record files there")
        )
    return files, problems
