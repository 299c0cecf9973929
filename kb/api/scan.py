"""``kb scan`` as functions: read Python model code against the records."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kb.scan.engine import ScanOptions, ScanReport

__all__ = ["ScanOptions", "ScanReport", "document", "scan", "scan_paths", "scanner"]

#: The most source text :func:`scan` reads in one call.
MAX_TEXT_BYTES = 4 * 1024 * 1024


def scanner(catalog: Any = None, options: ScanOptions | None = None) -> Any:
    """A :class:`kb.scan.engine.Scanner` running the whole registry's selection."""
    from kb.rules import RULES
    from kb.scan.engine import Scanner

    return Scanner(catalog, options, rules=RULES)


def scan_paths(
    paths: Iterable[str], options: ScanOptions | None = None, catalog: Any = None
) -> ScanReport:
    """Scan files and directories; raises ScanError for unusable settings."""
    return scanner(catalog, options).scan(list(paths))


def document(report: ScanReport) -> dict[str, Any]:
    """The ``--format json`` document: the ``kb check`` shape, the summary also counting
    calls and distinct operators, the paths skipped and why, the module inventory and
    the plan per module and phase (empty with ``fusion=False``)."""
    return {
        "findings": [f.as_dict() for f in report.findings],
        "summary": {
            "files": report.files,
            "calls": report.calls,
            "ops": report.ops,
            "candidates": report.candidates,
            "errors": report.count("error"),
            "warnings": report.count("warning"),
        },
        "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
        "inventory": [m.as_dict() for m in report.inventory],
        "plan": report.plan,
    }


def _within(real: str, root: str) -> bool:
    try:
        return os.path.commonpath([real, root]) == root
    except ValueError:  # another drive on Windows
        return False


def _has_kb_table(path: str) -> bool:
    """The file holds ``[tool.kb]``; also True when it cannot be read as TOML, so the
    scan's own reader reports it."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from kb.core.paths import read_regular_file

    try:
        data = tomllib.loads(read_regular_file(path, MAX_TEXT_BYTES).decode("utf-8"))
    except (OSError, ValueError):  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        return True
    tool = data.get("tool")
    return isinstance(tool, dict) and "kb" in tool


def config_within(start: str, root: str) -> Path | None:
    """The ``pyproject.toml`` with ``[tool.kb]`` a scan of ``start`` uses (the nearest at
    or above it, as the CLI finds it), looked for no higher than ``root`` and never
    through a symlink that leads out of it."""
    here = Path(os.path.realpath(start))
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        if not _within(str(folder), root):
            break
        candidate = folder / "pyproject.toml"
        real = os.path.realpath(candidate)
        if _within(real, root) and os.path.isfile(real) and _has_kb_table(real):
            return Path(real)
    return None


def _scan_within(made: Any, path: str, root: str) -> ScanReport:
    """:meth:`Scanner.scan` of one path whose files are all inside ``root``: a file of
    the tree that is a symlink leading out of it is skipped, never read."""
    from kb.scan.config import ConfigError, load
    from kb.scan.sources import Skipped, discover

    try:
        config = load(Path(path), made.options.config) if made.options.use_config else None
    except ConfigError as exc:
        from kb.scan.engine import ScanError

        raise ScanError(str(exc)) from None
    exclude = [*(config.exclude if config else []), *made.options.exclude]
    found, skipped = discover([path], exclude)
    inside = {str(f): _within(os.path.realpath(f), root) for f in found}
    kept = [f for f, ok in inside.items() if ok]
    outside = [
        Skipped(f, "a symlink to a file outside the server's root; not read")
        for f, ok in inside.items()
        if not ok
    ]
    report: ScanReport = made.scan(kept)
    report.skipped = [*skipped, *outside, *report.skipped]
    return report


def scan(
    catalog: Any = None,
    *,
    path: str | None = None,
    text: str | None = None,
    product: str | None = None,
    torch_npu: str | None = None,
    parallel: str | None = None,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    fusion: bool = True,
    root: str | None = None,
) -> dict[str, Any]:
    """The document for a file or directory (``path``, honouring its ``[tool.kb]``) or for
    source given as ``text``; UsageError for unusable arguments or settings.  ``catalog``
    may be a function that opens it, called once the product is known to be one.
    ``root`` (a resolved directory) keeps the reading inside it: the ``[tool.kb]`` table
    is looked for no higher, and files of the tree that link out of it are skipped (the
    caller checks that ``path`` itself is inside)."""
    from kb.api.errors import UsageError
    from kb.scan.engine import ScanError
    from kb.vocab import normalize

    if (text is None) == (path is None):
        raise UsageError("give either path (a file or directory) or text (Python source)")
    canon = normalize("product", product) if product else None
    if product and canon is None:
        raise UsageError(f"unknown product {product!r}")
    mode = normalize("parallel", parallel) if parallel else None
    if parallel and mode is None:
        from kb.vocab.parallel import PARALLEL_MODES

        raise UsageError(
            f"unknown parallel mode {parallel[:40]!r}; one of {', '.join(PARALLEL_MODES)}"
        )
    config = config_within(path, root) if path is not None and root is not None else None
    options = ScanOptions(
        product=canon,
        torch_npu=torch_npu,
        parallel=mode,
        select=list(select or []),
        ignore=list(ignore or []),
        fusion=fusion,
        config=config,
        use_config=path is not None and (root is None or config is not None),
    )
    made = scanner(catalog() if callable(catalog) else catalog, options)
    try:
        if path is not None:
            if not Path(path).exists():
                raise UsageError(f"{path}: no such file or directory")
            report = made.scan([path]) if root is None else _scan_within(made, path, root)
        else:
            body = text or ""
            if len(body.encode("utf-8")) > MAX_TEXT_BYTES:
                raise UsageError("the text is larger than the 4 MiB limit")
            report = made.scan_text(body, "<text>")
    except ScanError as exc:
        raise UsageError(str(exc)) from None
    return document(report)
