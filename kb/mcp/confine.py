"""The server's root: the one directory whose files the path-taking tools may read.

An agent can be talked into asking for ``/etc/shadow``, ``../../.ssh/id_rsa`` or a
symlink planted in the project that points out of it; a tool that reads what it is told
and quotes what it read is an exfiltration channel.  Every ``path`` argument is resolved
against the root (``kb mcp --root DIR``, else the working directory) with its symlinks
followed (``realpath``) and refused unless the result is the root or under it.  The
refusal never says whether the path exists.  A path check alone leaves a race (a
symlink swapped in after the check), so every input read is checked once more on the
opened descriptor (``kb.core.paths.confine_reads``).
"""

from __future__ import annotations

import os

from kb.api.errors import UsageError
from kb.core.paths import confine_reads

_ROOT: str | None = None


def set_root(path: str | os.PathLike[str] | None) -> str:
    """Fix the root for this process (``None``: the working directory); returns it."""
    global _ROOT
    _ROOT = os.path.realpath(os.fspath(path) if path is not None else os.getcwd())
    confine_reads(_ROOT)  # the check below is on paths; reads are checked again on the fd
    return _ROOT


def root() -> str:
    """The root, the working directory when none was set."""
    return _ROOT if _ROOT is not None else set_root(None)


def is_inside(real: str, top: str) -> bool:
    """``real`` (already resolved) is ``top`` or below it."""
    try:
        return os.path.commonpath([real, top]) == top
    except ValueError:  # another drive on Windows
        return False


def inside(path: str, name: str = "path") -> str:
    """``path`` as the tool should hand it on (relative paths stay relative when the root
    is the working directory, so results read as the CLI's); UsageError when its real
    location is outside the root."""
    from kb.mcp.limits import check_path

    top = root()
    check_path(name, path)
    joined = os.path.join(top, path)  # an absolute path replaces top
    try:
        real = os.path.realpath(joined)
    except (OSError, RuntimeError, ValueError) as exc:  # a loop, a name too long
        raise UsageError(f"{path[:200]!r}: cannot be resolved ({exc})") from None
    if not is_inside(real, top):
        raise UsageError(
            f"{path!r} is outside the server's root ({top}); give a path "
            "inside it (kb mcp --root DIR sets the root)"
        )
    if os.path.isabs(path) or os.path.realpath(os.getcwd()) == top:
        return path
    return joined
