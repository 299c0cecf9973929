"""Finding and reading the Python files ``kb scan`` looks at.

Directories are walked without following symlinks (no loops), honouring the
``.gitignore`` files on the way down and ``--exclude`` / ``[tool.kb] exclude`` patterns
(gitignore syntax, matched in linear time by :mod:`kb.scan.globs`; a ``.gitignore`` line
git would not use is skipped, as git does).  A directory that cannot be listed is
reported as skipped, not passed over in silence.  A file is read only when it is a
regular file of sane size; its encoding comes from the coding cookie (PEP 263), as
Python reads it.
Source given as text (:func:`from_text`) meets the same limits without a file.
Nothing here imports or runs the scanned code.
"""

from __future__ import annotations

import io
import os
import stat
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kb.core.paths import NotRegularFile, describe_os_error, read_capped, read_regular_file
from kb.scan.globs import PatternSet
from kb.scan.registrations import MAX_NATIVE_BYTES, NATIVE_SUFFIXES

MAX_BYTES = 4 * 1024 * 1024
DEFAULT_EXCLUDES = (
    ".git/",
    ".hg/",
    ".svn/",
    ".venv/",
    "venv/",
    "__pycache__/",
    ".tox/",
    ".nox/",
    "node_modules/",
    "build/",
    "dist/",
    ".eggs/",
    "*.egg-info/",
    "site-packages/",
    ".mypy_cache/",
    ".ruff_cache/",
)


@dataclass(frozen=True)
class Skipped:
    """A path that was named or found but cannot be scanned, and why."""

    path: str
    reason: str
    named: bool = False  # named on the command line (not found by walking a directory)


@dataclass(frozen=True)
class Source:
    path: str  # as shown in findings (relative to the working directory when possible)
    text: str


class SourceError(Exception):
    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


def _spec(patterns: Sequence[str]) -> PatternSet:
    """User patterns, each compiled alone: PatternError names the one that is bad."""
    return PatternSet.from_lines(patterns)


def _read_gitignore(path: str, shown: Path, skipped: list[Skipped]) -> PatternSet | None:
    """The lines of one ``.gitignore`` git would use (bad ones dropped), or None.

    Read like every side file (regular, non-blocking, capped); git reads the file as
    bytes, and so do file names here (``surrogateescape``), so no encoding can fail.
    """
    try:
        raw = read_capped(path, MAX_BYTES)
    except OSError as exc:
        skipped.append(Skipped(_display(shown), f"not used: {describe_os_error(exc)}"))
        return None
    text = raw.decode("utf-8", "surrogateescape")
    if text.startswith("\ufeff"):
        text = text[1:]
    return PatternSet.from_lines(text.splitlines(), strict=False)


def _display(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if rel.startswith("..") else rel


def discover(
    paths: Sequence[str],
    exclude: Sequence[str] = (),
    *,
    respect_gitignore: bool = True,
    native: list[Path] | None = None,
) -> tuple[list[Path], list[Skipped]]:
    """The ``.py`` files under ``paths`` (files named explicitly are always taken).

    ``native``, when given, receives the C/C++ sources found on the same walk (the same
    exclusions), where the tree may register operators (:mod:`kb.scan.registrations`).
    """
    found: list[Path] = []
    skipped: list[Skipped] = []
    user = _spec(list(exclude))
    defaults = _spec(DEFAULT_EXCLUDES)
    for raw in paths:
        path = Path(raw)
        try:
            st = path.stat()
        except OSError as exc:
            skipped.append(Skipped(raw, f"cannot read: {exc.strerror or exc}", named=True))
            continue
        except ValueError as exc:  # an embedded NUL byte
            skipped.append(Skipped(raw, f"cannot read: {exc}", named=True))
            continue
        if stat.S_ISREG(st.st_mode):
            found.append(path)
        elif stat.S_ISDIR(st.st_mode):
            found += _walk(path, user, defaults, respect_gitignore, skipped, native)
        else:
            skipped.append(
                Skipped(
                    raw,
                    "not a regular file or directory (a FIFO, socket or "
                    "device); give a .py file or a directory",
                    named=True,
                )
            )
    unique: dict[str, Path] = {}
    for p in found:
        unique.setdefault(os.path.normpath(str(p)), p)
    return list(unique.values()), skipped


def _walk(
    root: Path,
    user: PatternSet,
    defaults: PatternSet,
    gitignore: bool,
    skipped: list[Skipped],
    native: list[Path] | None = None,
) -> Iterator[Path]:
    ignores: list[tuple[str, PatternSet]] = []  # (directory relative to root, patterns)

    def unlistable(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else root
        skipped.append(
            Skipped(
                _display(where), f"directory not scanned: cannot list it: {exc.strerror or exc}"
            )
        )

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlistable, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        if gitignore and ".gitignore" in filenames:
            name = os.path.join(dirpath, ".gitignore")
            spec = _read_gitignore(name, Path(name), skipped)
            if spec:
                ignores.append((rel_dir, spec))

        def ignored(rel: str, is_dir: bool) -> bool:
            if defaults.match(rel, is_dir) or user.match(rel, is_dir):
                return True
            for base, spec in ignores:
                if base and not rel.startswith(base + "/"):
                    continue
                sub = rel[len(base) + 1 :] if base else rel
                if spec.match(sub, is_dir):
                    return True
            return False

        keep = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if not ignored(rel, True) and not os.path.islink(os.path.join(dirpath, d)):
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            is_native = native is not None and name.endswith(NATIVE_SUFFIXES)
            if not name.endswith(".py") and not is_native:
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            full = Path(dirpath) / name
            if ignored(rel, False):
                continue
            if is_native:
                native.append(full)  # type: ignore[union-attr]
                continue
            try:
                st = full.stat()
            except OSError:
                skipped.append(Skipped(_display(full), "dangling symlink or unreadable"))
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped.append(Skipped(_display(full), "not a regular file"))
                continue
            yield full


def read(path: Path) -> Source:
    """The text of one file; SourceError says why it cannot be Python source."""
    shown = _display(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise SourceError("not a regular file")
        if st.st_size > MAX_BYTES:
            raise SourceError(_too_large(st.st_size))
        raw = read_regular_file(path, MAX_BYTES + 1)  # non-blocking: a swapped-in FIFO
    except NotRegularFile:
        raise SourceError("not a regular file") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return Source(shown, decode(raw))


def within_root(paths: list[Path], root: str) -> tuple[list[Path], list[Skipped]]:
    """The paths whose real location is ``root`` or below it, and the others as skipped:
    a file of a scanned tree that is a symlink leading out of the root is never read."""
    kept: list[Path] = []
    outside: list[Skipped] = []
    for path in paths:
        try:
            real = os.path.realpath(path)
            inside = os.path.commonpath([real, root]) == root
        except (OSError, ValueError):  # a loop, another drive
            inside = False
        if inside:
            kept.append(path)
        else:
            outside.append(
                Skipped(str(path), "a symlink to a file outside the server's root; not read")
            )
    return kept, outside


def native_text(path: Path) -> tuple[str, str]:
    """(path as shown, text) of a C/C++ source for the registration reader; the text is ""
    when the file is unreadable or too large (a registration nobody can read is one the
    scan does without) or registers nothing (no ``TORCH_LIBRARY`` block, no ``OP_ADD``
    kernel)."""
    try:
        raw = read_regular_file(path, MAX_NATIVE_BYTES + 1)
    except (OSError, NotRegularFile):
        return _display(path), ""
    if len(raw) > MAX_NATIVE_BYTES or (b"TORCH_LIBRARY" not in raw and b"OP_ADD" not in raw):
        return _display(path), ""
    return _display(path), raw.decode("utf-8", "replace")


def from_text(text: str, shown_as: str) -> Source:
    """Source given as text, judged as if it were a UTF-8 file named ``shown_as``.

    Nothing is written or read: the text is encoded as the file would hold it and goes
    through the same limits and decoding as :func:`read` (a coding cookie included).
    """
    raw = text.encode("utf-8")
    if len(raw) > MAX_BYTES:
        raise SourceError(_too_large(len(raw)))
    return Source(shown_as, decode(raw))


def _too_large(size: int) -> str:
    return f"file is {size} bytes, larger than the {MAX_BYTES} byte limit"


def decode(raw: bytes) -> str:
    """Python source bytes to text, as Python imports them (PEP 263 cookie, BOM dropped).

    Bytes the declared encoding cannot decode are an error only where CPython's own
    compiler says so.  Importing a module compiles its bytes (``importlib``'s
    ``SourceLoader.source_to_code`` calls ``compile(data, path, "exec")``), and the
    compiler's tokenizer decodes tokens, not comments: a GBK comment in a file declared
    ``# coding=utf-8`` imports fine (CPython 3.11 does, checked with ``compile``), a
    string literal holding those bytes does not.  So a file that does not decode is
    compiled here, without running it, and reported only when that fails; otherwise the
    undecodable bytes (comments) are read as U+FFFD.
    """
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise SourceError("binary file (NUL bytes), not Python source", line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except (SyntaxError, LookupError) as exc:
        raise SourceError(f"unreadable encoding: {exc}") from None
    except UnicodeDecodeError as exc:
        text = _compiled_anyway(raw, encoding, exc)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def _compiled_anyway(raw: bytes, encoding: str, exc: UnicodeDecodeError) -> str:
    """The text of a file the declared encoding cannot decode, if CPython compiles it."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(raw, "<scanned>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        raise SourceError(
            f"not valid {encoding} source where Python decodes it: {err.msg}",
            err.lineno or 1,
            err.offset or 1,
        ) from None
    except (ValueError, MemoryError, RecursionError):
        pass  # the parse proper reports these with its own message
    else:
        return raw.decode(encoding, "replace")
    line = raw[: exc.start].count(b"\n") + 1
    raise SourceError(f"not valid {encoding} text (byte {exc.start})", line) from None


def touches_npu(text: str) -> bool:
    """Whether source text names a torch_npu call path (``torch_npu``, ``torch.ops.npu``,
    ...) in its code: a comment naming it does not count, nor a string literal unless
    the whole literal is such a path (``import_module("torch_npu")``).  Text the
    tokenizer gives up on is searched whole from there on."""
    from kb.vocab import NAMESPACE_PATHS

    paths = tuple(NAMESPACE_PATHS.values())
    if not any(path in text for path in paths):
        return False
    code: list[str] = []
    lines = text.splitlines(keepends=True)
    read = 0  # lines the tokenizer has finished
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            read = tok.start[0] - 1
            if tok.type == tokenize.COMMENT:
                continue
            if tok.type == tokenize.STRING:
                body = tok.string.lstrip("rRbBuUfF").strip("'\"")
                if not body.startswith(paths) or not body.replace(".", "_").isidentifier():
                    continue
            code.append(tok.string)
    except (tokenize.TokenError, SyntaxError):
        code += lines[read:]  # an unterminated literal or bad indentation: keep the rest
    joined = " ".join(code)
    return any(path in joined for path in paths)
