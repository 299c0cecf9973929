"""Formatters for ``kb check``: text for people, JSON for tools, GitHub annotations for CI.

Each takes the :class:`~kb.check.engine.Report` and returns the whole output as one
string; none of them decides anything about the findings.
"""

from __future__ import annotations

import json

from kb.lint.engine import Report
from kb.lint.findings import Finding
from kb.text.escape import github_data, github_property, printable

FORMATS = ("text", "json", "github")

_COLOURS = {"error": "31", "warning": "33", "info": "36"}


def _paint(text: str, code: str, on: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if on else text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 or word == 'info' else 's'}"


def text(report: Report, *, color: bool = False) -> str:
    """``file:line:col: CODE severity: message``, one block per file, then a summary line."""
    blocks: dict[str, list[Finding]] = {}
    for f in report.findings:
        blocks.setdefault(f.file, []).append(f)
    out: list[str] = []
    for file, findings in blocks.items():
        if out:
            out.append("")
        for f in findings:
            where = _paint(f"{printable(file)}:{f.line}:{f.column}:", "1", color)
            code = _paint(f.code, "1;" + _COLOURS[f.severity], color)
            sev = _paint(f.severity, _COLOURS[f.severity], color)
            out.append(f"{where} {code} {sev}: {printable(f.message)}")
    errors, warnings, infos = (report.count(s) for s in ("error", "warning", "info"))
    scope = f"{_plural(report.files, 'file')}, {_plural(report.candidates, 'candidate')}"
    if report.findings:
        counts = ", ".join(
            [_plural(errors, "error"), _plural(warnings, "warning"), _plural(infos, "info")]
        )
        summary = f"{counts} in {scope}"
        summary = _paint(summary, "1;31" if errors else "1", color)
        if out:
            out.append("")
    else:
        summary = _paint(f"no findings in {scope}", "1;32", color)
    out.append(summary)
    return "\n".join(out) + "\n"


def as_json(report: Report) -> str:
    """The api's document (:func:`kb.api.check.document`), indented."""
    from kb.api.check import document

    return json.dumps(document(report), ensure_ascii=False, indent=2) + "\n"


_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def github(report: Report) -> str:
    """GitHub Actions workflow commands: ``::error file=…,line=…,col=…,title=CODE::message``."""
    lines = []
    for f in report.findings:
        props = (
            f"file={github_property(f.file)},line={f.line},col={f.column},"
            f"title={github_property(f.code)}"
        )
        lines.append(f"::{_LEVEL[f.severity]} {props}::{github_data(f.message)}")
    return "".join(line + "\n" for line in lines)


def render(report: Report, fmt: str, *, color: bool = False) -> str:
    if fmt == "json":
        return as_json(report)
    if fmt == "github":
        return github(report)
    return text(report, color=color)
