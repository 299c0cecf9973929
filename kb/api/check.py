"""``kb check`` as functions: lint candidate lists against the records.

Importable API for agents and scripts::

    from kb.api.check import check_paths
    for f in check_paths(["candidates.yaml"], ignore=["KB110"]):
        print(f.file, f.line, f.code, f.message)

``check_paths`` raises :class:`InputError` for a file it cannot read (missing, a
directory, binary, over the size limit), ``ValueError`` for a select/ignore pattern
that matches no rule, and :class:`kb.catalog.compiled.StoreInvalid` when the records
themselves do not validate.  Everything wrong *inside* a file is a :class:`Finding`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kb.check.source import InputError
from kb.lint.findings import Finding, Severity

__all__ = [
    "Finding",
    "InputError",
    "Severity",
    "check",
    "check_paths",
    "check_text",
    "checker",
    "document",
    "foreign",
]

if TYPE_CHECKING:
    from kb.lint.engine import Report


def checker(
    catalog: Any = None, *, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None
) -> Any:
    """A :class:`kb.check.engine.Checker` running the whole registry's selection."""
    from kb.check.engine import Checker
    from kb.rules import RULES

    return Checker(catalog, rules=RULES, select=select, ignore=ignore)


def check_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    catalog: Any = None,
) -> list[Finding]:
    """Findings for candidate-list files (``-`` is standard input), file by file, by line."""
    from kb.check.source import read_source

    sources = [read_source(p) for p in paths]
    return checker(catalog, select=select, ignore=ignore).check_sources(sources).findings


def check_text(
    text: str,
    file: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    catalog: Any = None,
) -> list[Finding]:
    """Findings for one candidate list given as text."""
    return checker(catalog, select=select, ignore=ignore).check_text(file, text)


def document(report: Report) -> dict[str, Any]:
    """The ``--format json`` document, exactly the PRODUCT.md shape: findings plus a
    summary of files, candidates, errors and warnings."""
    return {
        "findings": [f.as_dict() for f in report.findings],
        "summary": {
            "files": report.files,
            "candidates": report.candidates,
            "errors": report.count("error"),
            "warnings": report.count("warning"),
        },
    }


def foreign(file: str, text: str, parsed: Any = None) -> Finding | None:
    """The one finding for a file that is not a candidate list at all, quoting nothing of
    it; None when it has the shape of one (a mapping of the top-level fields only,
    holding ``target`` or ``candidates``).

    A server that reads files for an agent must not turn ``/etc/shadow`` or a secrets
    YAML into "unknown field 'root:...'" findings: such a file stops at this finding,
    which gives a position and a generic reason, never a key or value it holds.
    """
    from kb.check.parse import TOP_FIELDS, parse
    from kb.check.rules.file import MISSING_FIELD, SYNTAX, UNKNOWN_FIELD, WRONG_TYPE

    doc, found = parsed if parsed is not None else parse(file, text)
    tail = "; it is not a candidate list, so nothing of it is shown"
    if doc.located is None:  # it did not parse: the syntax finding is the first
        first = found[0] if found else None
        line, column = (first.line, first.column) if first else (1, 1)
        return SYNTAX.finding(file, line, column, f"not valid YAML or JSON{tail}")
    data = doc.located.data
    if not isinstance(data, dict):
        return WRONG_TYPE.finding(
            file, 1, 1, f"the file is not a mapping with version, target and candidates{tail}"
        )
    for key in data:
        if key not in TOP_FIELDS:
            return UNKNOWN_FIELD.at(
                doc,
                (key,),
                "the file has a top-level field a candidate "
                f"list does not have (allowed: {', '.join(TOP_FIELDS)}){tail}",
                key=True,
            )
    if "target" not in data and "candidates" not in data:
        return MISSING_FIELD.finding(
            file, 1, 1, f"the file has neither target nor candidates{tail}"
        )
    return None


def check(
    catalog: Any = None,
    *,
    text: str | None = None,
    path: str | None = None,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    guard: bool = False,
) -> dict[str, Any]:
    """The document for one candidate list, given as ``text`` or as a ``path`` (never
    standard input: a server's stdin is its channel).  UsageError for a bad pair of
    arguments or oversized text, InputError for an unreadable file, ValueError for a
    select/ignore pattern that matches no rule.  ``catalog`` may be a function that
    opens it: called after the arguments are checked, so their errors come first.
    With ``guard``, a file (not text) that is not a candidate list gives only its
    :func:`foreign` finding."""
    from kb.api.errors import UsageError
    from kb.check.source import read_source
    from kb.core import yamlpos

    if (text is None) == (path is None):
        raise UsageError("give either text (the candidate list) or path (a file), not both")
    if path is not None:
        if path.strip() == "-":
            raise UsageError("path '-' would read the server's standard input; pass text")
        file, body = read_source(path)
    else:
        file, body = "<text>", text or ""
        if len(body.encode("utf-8")) > yamlpos.MAX_BYTES:
            raise UsageError(f"the text is larger than the {yamlpos.MAX_BYTES} byte limit")
    made = checker(catalog() if callable(catalog) else catalog, select=select, ignore=ignore)
    from kb.lint.engine import Report

    parsed = None
    if guard and path is not None:
        from kb.check.parse import parse

        parsed = parse(file, body)  # read once: for the guard and the check
        stop = foreign(file, body, parsed)
        if stop is not None:
            return document(Report(files=1, findings=[stop]))
    report = Report()
    made.check_text(file, body, report, parsed)
    return document(report)
