"""The shape every checker rule has (yamllint/ruff style: one small unit per rule).

A rule is a class with its stable ``code``, a ``name``, a ``severity``, a one-line
``summary``, ``why`` it matters, a failing and a fixed candidate-list snippet (``fail``,
``fix``) and the ``check`` itself.  The site's rule pages, ``kb rules`` and the rule
tests are all generated from these attributes, so documentation cannot drift from
behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from kb.lint.context import Context
from kb.lint.declared import apply_declared_dtypes
from kb.lint.findings import Finding, Severity
from kb.lint.model import Candidate, Document, Path


class RuleUnit:
    """One rule.  Subclasses set the class attributes and override ``check``."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[Severity] = "error"
    summary: ClassVar[str] = ""
    why: ClassVar[str] = ""
    fail: ClassVar[str] = ""
    fix: ClassVar[str] = ""
    #: Which front ends run the rule: ``check`` (candidate lists), ``scan`` (Python code).
    fronts: ClassVar[tuple[str, ...]] = ("check",)
    #: Language of the fail/fix snippets: candidate-list YAML, or Python for scan rules.
    language: ClassVar[str] = "yaml"

    def check(self, doc: Document, ctx: Context) -> Iterator[Finding]:
        """Findings for one parsed document; the default finds nothing."""
        return iter(())

    def finding(
        self, file: str, line: int, column: int, message: str, candidate: int | None = None
    ) -> Finding:
        """A finding of this rule at a known position (for front ends that emit as they read)."""
        return Finding(file, line, column, self.code, self.severity, message, candidate)

    def at(
        self,
        doc: Document,
        path: Path,
        message: str,
        *,
        candidate: int | None = None,
        key: bool = False,
    ) -> Finding:
        """A finding of this rule at ``path`` (its value, or its key when ``key``)."""
        line, col = doc.where(path, key=key)
        return self.finding(doc.file, line, col, message, candidate)

    def __repr__(self) -> str:
        return f"<rule {self.code} {self.name}>"


class CandidateRule(RuleUnit):
    """A rule that looks at one candidate at a time.

    ``kinds`` says which candidates it reads; rules about how an operator is called
    skip candidates marked ``not-applicable`` (they already say it does not fit).
    """

    kinds: ClassVar[tuple[str, ...]] = ("fusion",)
    skip_not_applicable: ClassVar[bool] = True
    #: Operator rules judge a call in scanned code the same way as a candidate.
    fronts: ClassVar[tuple[str, ...]] = ("check", "scan")

    def check(self, doc: Document, ctx: Context) -> Iterator[Finding]:
        for cand in self.candidates(doc, ctx):
            yield from self.check_candidate(doc, ctx, cand)

    def candidates(self, doc: Document, ctx: Context) -> list[Candidate]:
        """The candidates this rule reads, listed once per document for every rule of
        the same kinds (the list is the same for all of them)."""
        key = (self.kinds, self.skip_not_applicable)
        listed = doc.judged.get(key)
        if listed is None:
            listed = []
            for cand in doc.candidates:
                if cand.kind not in self.kinds:
                    continue
                if self.skip_not_applicable and cand.status == "not-applicable":
                    continue
                if cand.operator:  # the kernel sees a declared dtype, not its carrier
                    apply_declared_dtypes(cand, ctx.operator(cand.operator))
                listed.append(cand)
            doc.judged[key] = listed
        return listed

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        return iter(())

    def on(
        self, doc: Document, cand: Candidate, path: Path, message: str, *, key: bool = False
    ) -> Finding:
        """A finding about ``cand`` at ``path`` relative to the candidate."""
        return self.at(doc, cand.path + path, message, candidate=cand.index, key=key)
