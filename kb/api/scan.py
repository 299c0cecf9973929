"""``kb scan`` as functions: read Python model code against the records."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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


def scan_paths(paths: Iterable[str], options: ScanOptions | None = None,
               catalog: Any = None) -> ScanReport:  # fmt: skip
    """Scan files and directories; raises ScanError for unusable settings."""
    return scanner(catalog, options).scan(list(paths))


def document(report: ScanReport) -> dict[str, Any]:
    """The ``--format json`` document: the ``kb check`` shape, the summary also counting
    calls and distinct operators, plus the paths skipped and why."""
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
    }


def scan(catalog: Any = None, *, path: str | None = None, text: str | None = None,
         product: str | None = None, torch_npu: str | None = None,
         select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
         fusion: bool = True) -> dict[str, Any]:  # fmt: skip
    """The document for a file or directory (``path``, honouring its ``[tool.kb]``) or for
    source given as ``text``; UsageError for unusable arguments or settings.  ``catalog``
    may be a function that opens it, called once the product is known to be one."""
    from pathlib import Path

    from kb.api.errors import UsageError
    from kb.scan.engine import ScanError
    from kb.vocab import normalize

    if (text is None) == (path is None):
        raise UsageError("give either path (a file or directory) or text (Python source)")
    canon = normalize("product", product) if product else None
    if product and canon is None:
        raise UsageError(f"unknown product {product!r}")
    options = ScanOptions(product=canon, torch_npu=torch_npu, select=list(select or []),
                          ignore=list(ignore or []), fusion=fusion,
                          use_config=path is not None)  # fmt: skip
    made = scanner(catalog() if callable(catalog) else catalog, options)
    try:
        if path is not None:
            if not Path(path).exists():
                raise UsageError(f"{path}: no such file or directory")
            report = made.scan([path])
        else:
            body = text or ""
            if len(body.encode("utf-8")) > MAX_TEXT_BYTES:
                raise UsageError("the text is larger than the 4 MiB limit")
            report = made.scan_text(body, "<text>")
    except ScanError as exc:
        raise UsageError(str(exc)) from None
    return document(report)
