"""Running the rules over parsed documents: selection, inline ignores, ordering."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kb.check.binding import bind
from kb.check.context import Context
from kb.check.findings import Finding
from kb.check.model import Document
from kb.check.parse import parse
from kb.check.registry import RULES, expand
from kb.check.rules.base import RuleUnit
from kb.check.suppress import ignore_comments, matches


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    candidates: int = 0

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)


def active_rules(select: Sequence[str] | None, ignore: Sequence[str] | None) -> tuple[str, ...]:
    """Codes that run, from --select/--ignore patterns (ValueError for a pattern matching nothing)."""
    chosen = expand(list(select or ()))
    dropped = expand(list(ignore or ()))
    return tuple(r.code for r in RULES
                 if (not chosen or matches(r.code, chosen)) and not matches(r.code, dropped))  # fmt: skip


def rules_for(front: str, codes: Iterable[str]) -> list[RuleUnit]:
    """The rule units a front end runs, among the selected codes, in code order."""
    wanted = set(codes)
    return [r for r in RULES if r.code in wanted and front in r.fronts]


def _suppressed(findings: list[Finding], text: str, first_lines: dict[int, int]) -> list[Finding]:
    comments = ignore_comments(text)
    if not comments:
        return findings
    by_line: dict[int, list[str]] = {}
    for c in comments:
        by_line.setdefault(c.line, []).extend(c.codes)
    kept = []
    for f in findings:
        codes = list(by_line.get(f.line, ()))
        if f.candidate is not None and f.candidate in first_lines:
            codes += by_line.get(first_lines[f.candidate], ())
        if codes and matches(f.code, codes):
            continue
        kept.append(f)
    return kept


class Checker:
    """Checks documents against one catalog with one rule selection."""

    def __init__(self, catalog: Any = None, *, select: Sequence[str] | None = None,
                 ignore: Sequence[str] | None = None) -> None:  # fmt: skip
        if catalog is None:
            from kb.compiled import open_catalog

            catalog = open_catalog()
        self.ctx = Context(catalog)
        codes = set(active_rules(select, ignore))
        self.codes = codes
        self.rules: list[RuleUnit] = rules_for("check", codes)

    def check_text(self, file: str, text: str, report: Report | None = None) -> list[Finding]:
        doc, found = parse(file, text)
        self.bind(doc)
        findings = [f for f in found if f.code in self.codes]
        for rule in self.rules:
            findings.extend(rule.check(doc, self.ctx))
        first_lines = {c.index: doc.where(c.path)[0] for c in doc.candidates}
        findings = _suppressed(findings, text, first_lines)
        findings.sort(key=Finding.sort_key)
        if report is not None:
            report.files += 1
            report.candidates += len(doc.candidates)
            report.findings.extend(findings)
        return findings

    def bind(self, doc: Document) -> None:
        """State every candidate in its operator's schema terms (see :mod:`kb.check.binding`)."""
        for cand in doc.candidates:
            rec = self.ctx.operator(cand.operator) if cand.operator else None
            if rec is not None:
                bind(doc, cand, rec)

    def check_sources(self, sources: Iterable[tuple[str, str]]) -> Report:
        report = Report()
        for file, text in sources:
            self.check_text(file, text, report)
        return report
