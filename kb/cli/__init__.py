"""The ``kb`` command line: one small module per verb under ``kb.cli``.

Each verb module defines ``add_parser(subparsers)`` and the function it sets as
``func``; this file only wires them.  Imports stay lazy so ``kb show`` pays only for
what it uses: a plain ``kb show`` or ``kb search`` is read by :mod:`kb.cli.fast`
without argparse, everything else by the parser :mod:`kb.cli.parser` builds.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import sys
from typing import TYPE_CHECKING

from kb.api.errors import FOUND, OK, UNUSABLE, NotFound, UsageError

if TYPE_CHECKING:
    import argparse

__all__ = ["EXIT_STATUS", "FOUND", "OK", "UNUSABLE", "UsageError", "build_parser", "main"]

VERBS = (
    "search",
    "show",
    "list",
    "validate",
    "index",
    "check",
    "scan",
    "rules",
    "tree",
    "advise",
    "prefetch_size",
    "site",
    "doctor",
    "mcp",
    "emulate",
    "port",
    "verify",
)


#: The exit codes (kb.api.errors) in words, after every verb's help.
EXIT_STATUS = (
    "Exit status: 0 success, 1 findings or a name that does not exist, 2 unusable input: "
    "bad arguments, an unreadable file, or records that do not validate (every verb "
    "gives 2 for a broken record store)."
)


def build_parser(verbs: tuple[str, ...] = VERBS) -> argparse.ArgumentParser:
    """The argparse parser of ``verbs`` (:mod:`kb.cli.parser`)."""
    from kb.cli.parser import build

    return build(verbs)


def _only_verb(argv: list[str]) -> tuple[str, ...]:
    """Import just the verb asked for (fast path); all verbs for help or unknown."""
    for arg in argv:
        if arg.startswith("-"):
            continue
        name = arg.replace("-", "_")
        return (name,) if name in VERBS else VERBS
    return VERBS


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (captured in tests)
        pass


def _say(message: str) -> None:
    """A message to stderr; a file name or argument quoted in it cannot drive the
    terminal, and no line but the first starts at the margin, so nothing in it can
    pass for a CI workflow command (``::error``) of its own."""
    from kb.text.escape import printable

    first, *rest = message.split("\n")
    lines = [printable(first)] + [printable(x if x[:1] in (" ", "\t") else "  " + x) for x in rest]
    try:
        if sys.stderr is not None:
            print("\n".join(lines), file=sys.stderr)
    except (OSError, ValueError):
        pass


def _json_error(args: argparse.Namespace, exc: Exception, rc: int) -> int:
    """Under ``--format json`` stdout always carries a document, an error one too
    (``{"error": message, "exit": code}``), so a tool reading stdout never meets nothing."""
    if getattr(args, "format", None) == "json":
        import json

        print(json.dumps({"error": str(exc), "exit": rc}, ensure_ascii=False))
    return rc


def _check_text(args: argparse.Namespace) -> None:
    """Names, queries and answers are UTF-8 text: one holding other bytes is a usage
    error naming it (escaped), before it reaches a lookup that cannot encode it.  File
    and directory names may hold any byte: a verb lists its path arguments in
    ``path_args`` (``set_defaults``), and ``type=Path`` values are paths by type."""
    from kb.core.paths import is_utf8
    from kb.text.escape import printable

    paths = set(getattr(args, "path_args", ()))
    for dest, value in vars(args).items():
        if dest in paths:
            continue
        # (``list`` here is the kb.cli.list module once that verb is imported)
        for one in value if isinstance(value, builtins.list) else [value]:
            if isinstance(one, str) and not is_utf8(one):
                shown = printable(one[:80])
                label = "" if dest in POSITIONAL_TEXT else f"--{dest.replace('_', '-')} "
                raise UsageError(
                    f"{label}'{shown}' is not valid UTF-8 text; names, queries and values "
                    "are UTF-8 (only file names may hold other bytes)"
                )


#: Positional arguments named in messages without a flag.
POSITIONAL_TEXT = frozenset({"name", "query", "tree", "answers", "code", "section"})


def _no_encoding_errors() -> None:
    """A file name holding bytes that are not UTF-8 reaches the output as lone
    surrogates: printed as an escape (``\\udcff``, valid in a JSON string too), never a
    UnicodeEncodeError, nor (a C locale's ``surrogateescape``) a raw byte that makes a
    JSON document invalid UTF-8.  Text output escapes such names itself (``printable``)."""
    stream = sys.stdout
    if stream is not None and getattr(stream, "errors", None) in ("strict", "surrogateescape"):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if sys.stdout is None or sys.stdout.closed:  # started with stdout closed (>&-)
        _say("kb: standard output is closed; nothing can be printed")
        return UNUSABLE
    verb = "kb"
    _no_encoding_errors()
    try:
        from kb.cli.fast import parse

        args = parse(argv)
        if args is None:  # anything but the plain forms: argparse, with its help and errors
            parser = build_parser(_only_verb(argv))
            args = parser.parse_args(argv)
            if not getattr(args, "func", None):
                parser.print_help()
                return UNUSABLE
        verb = f"kb {args.verb}"
        try:
            _check_text(args)
            rc = int(args.func(args) or 0)
        except NotFound as exc:  # a name nothing has: 1, as for kb show NAME
            _say(f"{verb}: {exc}")
            rc = _json_error(args, exc, FOUND)
        except UsageError as exc:
            _say(f"{verb}: {exc}")
            rc = _json_error(args, exc, UNUSABLE)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:  # the reader went away (kb … | head): not an error
        _quiet_stdout()
        return OK
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EIO, errno.EBADF, errno.EDQUOT, errno.EFBIG):
            raise
        _quiet_stdout()
        _say(f"{verb}: cannot write the output: {exc.strerror or exc}")
        return UNUSABLE
    except KeyboardInterrupt:
        return 130
