"""The candidate-list front end: parse, bind to the schemas, run the rules it is given."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kb.check.binding import bind
from kb.check.parse import parse
from kb.lint.context import Context
from kb.lint.engine import Report, active_rules, rules_for, suppressed
from kb.lint.findings import Finding
from kb.lint.model import Document
from kb.lint.unit import RuleUnit

__all__ = ["Checker", "Report"]


class Checker:
    """Checks documents against one catalog with one rule selection.

    ``rules`` is the whole registry (:data:`kb.rules.RULES`); the selection picks the
    codes that run and the ``check`` front end keeps the units meant for it.
    """

    def __init__(
        self,
        catalog: Any = None,
        *,
        rules: Sequence[RuleUnit],
        select: Sequence[str] | None = None,
        ignore: Sequence[str] | None = None,
    ) -> None:
        if catalog is None:
            from kb.catalog.compiled import open_catalog

            catalog = open_catalog()
        self.ctx = Context(catalog, codes=tuple(r.code for r in rules))
        codes = set(active_rules(rules, select, ignore))
        self.codes = codes
        self.rules: list[RuleUnit] = rules_for(rules, "check", codes)

    def check_text(
        self,
        file: str,
        text: str,
        report: Report | None = None,
        parsed: tuple[Document, list[Finding]] | None = None,
    ) -> list[Finding]:
        """Findings for one candidate list; ``parsed`` is ``parse(file, text)`` when the
        caller has it already (read once, not twice)."""
        doc, found = parsed if parsed is not None else parse(file, text)
        self.bind(doc)
        findings = [f for f in found if f.code in self.codes]
        for rule in self.rules:
            findings.extend(rule.check(doc, self.ctx))
        first_lines = {c.index: doc.where(c.path)[0] for c in doc.candidates}
        findings = suppressed(findings, doc, first_lines)
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
