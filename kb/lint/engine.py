"""The rule engine both front ends share: which units run, and which findings survive.

It knows rule units only as values handed to it (the registry, :mod:`kb.rules`, sits
above both front ends), so nothing here imports a front end.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kb.lint.findings import Finding
from kb.lint.model import Document
from kb.lint.suppress import ignore_comments, matches
from kb.lint.unit import RuleUnit


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    candidates: int = 0

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)


def expand(rules: Sequence[RuleUnit], patterns: Iterable[str]) -> tuple[str, ...]:
    """Normalise --select/--ignore values (codes, prefixes such as KB4, or rule names).

    Raises ValueError naming a pattern that matches no rule.
    """
    out: list[str] = []
    for raw in patterns:
        for part in raw.split(","):
            p = part.strip()
            if not p:
                continue
            rule = next((r for r in rules if r.name == p.lower()), None)
            if rule is not None:
                out.append(rule.code)
                continue
            if not any(r.code.startswith(p.upper()) for r in rules):
                raise ValueError(f"{p!r} matches no rule code or name ('kb rules' lists them)")
            out.append(p.upper())
    return tuple(out)


def active_rules(
    rules: Sequence[RuleUnit], select: Sequence[str] | None, ignore: Sequence[str] | None
) -> tuple[str, ...]:
    """Codes that run, from --select/--ignore patterns (ValueError for a pattern matching nothing)."""
    chosen = expand(rules, list(select or ()))
    dropped = expand(rules, list(ignore or ()))
    return tuple(
        r.code
        for r in rules
        if (not chosen or matches(r.code, chosen)) and not matches(r.code, dropped)
    )


def rules_for(rules: Sequence[RuleUnit], front: str, codes: Iterable[str]) -> list[RuleUnit]:
    """The rule units a front end runs, among the selected codes, in code order."""
    wanted = set(codes)
    return [r for r in rules if r.code in wanted and front in r.fronts]


def suppressed(
    findings: list[Finding], doc: Document, first_lines: dict[int, int]
) -> list[Finding]:
    """``findings`` less those an inline ``# kb: ignore[…]`` comment silences."""
    if doc.located is None:  # the file did not load: nothing in it is known to be a comment
        return findings
    comments = ignore_comments(doc.text, doc.located)
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
