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
    calls and distinct operators, the paths skipped and why, the module inventory, the
    plan per module and phase (empty with ``fusion=False``), and the files the model
    reader meant to follow (imports, configurations) but did not read, and why."""
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
        "not_followed": [{"path": u.path, "reason": u.reason} for u in report.unread],
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
    except (OSError, ValueError, RecursionError):  # TOMLDecodeError, UnicodeDecodeError
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
    quantization: str | None = None,
    graph_mode: str | None = None,
    exclude: Sequence[str] | None = None,
    custom_ops: Sequence[str] | None = None,
    config: str | None = None,
    use_config: bool = True,
    plan: bool = False,
    model_config: str | None = None,
) -> dict[str, Any]:
    """The document for a file or directory (``path``, honouring its ``[tool.kb]``) or for
    source given as ``text``; UsageError for unusable arguments or settings.  ``catalog``
    may be a function that opens it, called once the product is known to be one.
    ``root`` (a resolved directory) keeps the reading inside it: the ``[tool.kb]`` table
    is looked for no higher, and files of the tree that link out of it are skipped (the
    caller checks that ``path`` itself is inside).  The other options are the CLI's:
    ``plan`` reads the inventory and plan even with ``fusion`` off (then without KB6xx
    findings), ``config`` names the pyproject.toml, ``use_config=False`` ignores it,
    ``model_config`` is the checkpoint's hyper-parameters (a JSON file)."""
    from kb.api.errors import UsageError
    from kb.scan.engine import ScanError

    if (text is None) == (path is None):
        raise UsageError("give either path (a file or directory) or text (Python source)")
    options = _options(
        product=product,
        torch_npu=torch_npu,
        parallel=parallel,
        quantization=quantization,
        graph_mode=graph_mode,
        select=select,
        ignore=ignore,
        exclude=exclude,
        custom_ops=custom_ops,
        fusion=fusion or plan,
    )
    options.model_config = model_config
    if path is not None and use_config:
        options.config = Path(config) if config is not None else None
        if options.config is None and root is not None:
            options.config = config_within(path, root)
        options.use_config = root is None or options.config is not None
    else:
        options.use_config = False
    made = scanner(catalog() if callable(catalog) else catalog, options)
    try:
        if path is not None:
            if not Path(path).exists():
                raise UsageError(f"{path}: no such file or directory")
            report = made.scan([path], within=root)
        else:
            body = text or ""
            if len(body.encode("utf-8")) > MAX_TEXT_BYTES:
                raise UsageError("the text is larger than the 4 MiB limit")
            report = made.scan_text(body, "<text>")
    except ScanError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # a name too long, a loop: the caller's path, said plainly
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not fusion:
        report.findings = [f for f in report.findings if not f.code.startswith("KB6")]
    return document(report)


def _options(
    *,
    product: str | None,
    torch_npu: str | None,
    parallel: str | None,
    quantization: str | None,
    graph_mode: str | None,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    exclude: Sequence[str] | None,
    custom_ops: Sequence[str] | None,
    fusion: bool,
) -> ScanOptions:
    """The scan's options from the caller's words, each checked as the CLI checks it."""
    from kb.api.errors import UsageError
    from kb.scan.globs import PatternError, compile_pattern
    from kb.vocab import GRAPH_MODES, ambiguous_scheme_message, normalize

    canon = normalize("product", product) if product else None
    if product and canon is None:
        raise UsageError(f"unknown product {product!r}")
    if torch_npu:
        from kb.core.releasenumber import release_text

        if release_text(torch_npu) is None:
            raise UsageError(f"torch_npu {torch_npu[:40]!r} is not a release such as 2.7.1")
    mode = normalize("parallel", parallel) if parallel else None
    if parallel and mode is None:
        from kb.vocab.parallel import PARALLEL_MODES

        raise UsageError(
            f"unknown parallel mode {parallel[:40]!r}; one of {', '.join(PARALLEL_MODES)}"
        )
    scheme = normalize("quantization", quantization) if quantization else None
    if quantization and scheme is None:
        shared = ambiguous_scheme_message(quantization)
        raise UsageError(shared or f"unknown quantization scheme {quantization[:40]!r}")
    if graph_mode is not None and graph_mode not in GRAPH_MODES:
        raise UsageError(f"unknown graph mode {graph_mode[:40]!r}; one of {', '.join(GRAPH_MODES)}")
    for pattern in exclude or []:
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            raise UsageError(f"exclude {pattern!r} is not a usable pattern: {exc}") from None
    return ScanOptions(
        product=canon,
        torch_npu=torch_npu,
        graph_mode=graph_mode,
        quantization=scheme,
        parallel=mode,
        select=list(select or []),
        ignore=list(ignore or []),
        exclude=list(exclude or []),
        custom_ops=list(custom_ops or []),
        fusion=fusion,
    )
