"""Formatters for ``kb scan``: text, JSON (the ``kb check`` shape plus calls/files/ops),
GitHub annotations, and SARIF 2.1.0 for code-scanning upload.

Each takes the :class:`~kb.scan.engine.ScanReport` and returns the whole output; none of
them decides anything about the findings.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kb.scan.engine import ScanReport
from kb.text import findings as check_format
from kb.text.escape import printable, uri_path

FORMATS = ("text", "json", "github", "sarif")
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def text(report: ScanReport, *, color: bool = False, verbose: bool = False) -> str:
    out = check_format.text(report, color=color)  # type: ignore[arg-type]
    out = out.replace(" candidates", " calls").replace(" candidate", " call")
    extra: list[str] = []
    for skipped in report.skipped:
        extra.append(f"{skipped.path}: skipped: {skipped.reason}")
    extra += _recognised(report)
    if verbose:
        extra += report.notes
        extra.append(
            f"{report.ops} distinct operators in {report.calls} calls"
            + (f"; settings from {report.config}" if report.config else "")
        )
    return out + "".join(printable(line) + "\n" for line in extra)


def _recognised(report: ScanReport) -> list[str]:
    """The model modules a scan of named files recognised, and where their plan is."""
    if not report.inventory:
        return []
    names = list(dict.fromkeys(f"{m.name} ({m.kind})" for m in report.inventory))
    shown = ", ".join(names[:8]) + (f", and {len(names) - 8} more" if len(names) > 8 else "")
    return [
        f"model modules recognised: {shown}",
        "kb scan --plan FILE proposes the fused operators for each, phase by phase",
    ]


def as_json(report: ScanReport) -> str:
    """The api's document (:func:`kb.api.scan.document`), indented."""
    from kb.api.scan import document

    return json.dumps(document(report), ensure_ascii=False, indent=2) + "\n"


def sarif(report: ScanReport) -> str:
    """SARIF 2.1.0: one run, the rules that fired as ``tool.driver.rules``."""
    from kb import __version__
    from kb.rules import BY_CODE

    codes = sorted({f.code for f in report.findings})
    index = {code: i for i, code in enumerate(codes)}
    rules = []
    for code in codes:
        unit = BY_CODE.get(code)
        rule: dict[str, Any] = {"id": code}
        if unit is not None:
            rule.update(
                {
                    "name": unit.name,
                    "shortDescription": {"text": unit.summary},
                    "fullDescription": {"text": unit.why},
                    "defaultConfiguration": {"level": _SARIF_LEVEL[unit.severity]},
                    "help": {"text": f"kb rules {code}"},
                }
            )
        rules.append(rule)
    results = []
    for f in report.findings:
        uri = uri_path(f.file.replace(os.sep, "/"))
        results.append(
            {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": _SARIF_LEVEL[f.severity],
                "message": {"text": f.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {
                                "uri": uri,
                                **({} if os.path.isabs(f.file) else {"uriBaseId": "%SRCROOT%"}),
                            },
                            "region": {
                                "startLine": max(1, f.line),
                                "startColumn": max(1, f.column),
                            },
                        }
                    }
                ],
            }
        )
    run = {
        "tool": {"driver": {"name": "kb", "version": __version__, "rules": rules}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def render(report: ScanReport, fmt: str, *, color: bool = False, verbose: bool = False) -> str:
    if fmt == "json":
        return as_json(report)
    if fmt == "github":
        return check_format.github(report)  # type: ignore[arg-type]
    if fmt == "sarif":
        return sarif(report)
    return text(report, color=color, verbose=verbose)


def plan_text(report: ScanReport) -> str:
    """``kb scan --plan``: the module inventory, then each module's plan per phase, as a
    porting engineer reads it (chain, stage operators with arguments, prerequisites)."""
    out: list[str] = []
    by_file: dict[str, list[Any]] = {}
    for m in report.inventory:
        by_file.setdefault(m.file, []).append(m)
    plans: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for entry in report.plan:
        plans.setdefault((entry.get("file", ""), entry["module"], entry["kind"]), []).append(entry)
    for file, modules in by_file.items():
        out.append(f"{file}")
        for m in modules:
            facts = ", ".join(f"{k}={v}" for k, v in m.facts.items() if k not in ("projections",))
            out.append(
                f"  {m.name} [{m.kind}] lines {m.line}-{m.end_line}"
                + (f": {facts}" if facts else "")
            )
            for text in m.unknown:
                out.append(f"    unknown: {text}")
            for text in m.not_proposed:
                out.append(f"    not proposed: {text}")
            for entry in plans.get((m.file, m.name, m.kind), []):
                head = f"    {entry['phase']}: " + (
                    f"chain {entry['chain']}" if entry.get("chain") else "no chain"
                )
                out.append(head)
                if entry.get("none"):
                    out.append(f"      {entry['none']}")
                for stage in entry.get("stages", []):
                    args = ", ".join(f"{k}={v!r}" for k, v in (stage.get("args") or {}).items())
                    line = (
                        f"      {stage['stage']}: {stage['operator']}({args}) [{stage['mapping']}]"
                    )
                    out.append(line)
                    if stage.get("verified"):
                        out.append(
                            f"        verified: {stage['verified']} ({stage['verify_note']})"
                        )
                    for note in stage.get("notes", []):
                        out.append(f"        note: {note}")
                    for question in stage.get("questions", []):
                        out.append(f"        unknown: {question}")
                if entry.get("prerequisites"):
                    out.append(f"      prerequisites: {', '.join(entry['prerequisites'])}")
                if entry.get("alternatives"):
                    out.append(f"      other chains: {', '.join(entry['alternatives'])}")
                out += _other_deployments(entry)
                for note in entry.get("notes", []):
                    out.append(f"      note: {note}")
    out += _not_read(report)
    if not report.inventory:
        out.append(
            "no modules recognised (nn.Module classes with attention, MLP, MoE or norm parts)"
            + (" in the files read" if report.files else "")
        )
    return "".join(printable(line) + "\n" for line in out)


def _not_read(report: ScanReport) -> list[str]:
    """Why a plan may be missing a module: scanned files that could not be read or parsed
    (their KB500 findings), paths skipped, and files the reader meant to follow."""
    from kb.scan.rules import SOURCE_UNREADABLE

    out = [
        f"{f.file}:{f.line}: not read: {f.message}"
        for f in report.findings
        if f.code == SOURCE_UNREADABLE.code
    ]
    out += [f"{s.path}: skipped: {s.reason}" for s in report.skipped]
    out += [f"{u.path}: not followed: {u.reason}" for u in report.unread]
    return out


def _other_deployments(entry: dict[str, Any]) -> list[str]:
    """The chains held back for a deployment the scan did not ask for, one line per mode."""
    by_reason: dict[str, list[str]] = {}
    for held in entry.get("not_proposed", []):
        if held.get("chain"):
            by_reason.setdefault(held["reason"], []).append(held["chain"])
    return [f"      {reason}: {', '.join(chains)}" for reason, chains in by_reason.items()]
