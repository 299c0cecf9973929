"""An emulated call judged by its record, with the rule units of ``kb check``.

The call becomes a candidate that states everything a real call fixes: every scalar
argument (defaults included) and every tensor's dtype, shape and format.  The same
candidate rules that judge a candidate list or a scanned call then run on it, so a
wrong dtype, a value outside the allowed set, a broken record rule or, with a product
set, an unsupported product reads exactly as ``kb check`` would word it.

A value a reference adds to its record's range (``kb.reference.registry.WIDENED``: the
one-rank expert-parallel group the MC2 references compute, which the device refuses) is
left unstated, so the emulator runs what the reference models.

A tensor's format is the one ``npu_format_cast`` remembered for it.  A tensor never
cast is in a base format: the candidate states the base format its parameter lists
(ND for every fused operator), else ND, so a parameter or a record rule that wants
FRACTAL_NZ says what the device would, and the error adds that the tensor was never cast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.catalog.binding import dtype_value, takes_dtype
from kb.lint.context import Context
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document, Target, TensorSpec
from kb.lint.unit import CandidateRule
from kb.reference.registry import WIDENED
from kb.vocab import BASE_FORMATS


@dataclass
class TensorFacts:
    """What the emulator knows of one tensor argument."""

    dtype: str | None
    shape: list[int]
    format: str | None  # remembered by npu_format_cast, else None (a base format)


@dataclass
class Verdict:
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    #: tensor parameters stated in a base format because they were never cast
    never_cast: list[str] = field(default_factory=list)


#: verdicts kept before the memo starts over
_REMEMBERED = 4096


def _is_tensor(p: dict[str, Any]) -> bool:
    return str(p.get("type", "")).startswith("Tensor")


def _scalar(p: dict[str, Any], value: Any) -> Any:
    if takes_dtype(p):
        return dtype_value(p, value)
    if isinstance(value, tuple):
        return list(value)
    return value


class Validator:
    """Runs the candidate rules of the registry on emulated calls for one target."""

    def __init__(self, catalog: Any, product: str | None, torch_npu: str | None) -> None:
        from kb.lint.engine import rules_for
        from kb.rules import RULES

        self.ctx = Context(catalog, codes=tuple(r.code for r in RULES))
        every = [r.code for r in RULES]
        self.rules = [r for r in rules_for(RULES, "scan", every) if isinstance(r, CandidateRule)]
        self.target = Target(product=product, torch_npu=torch_npu)
        #: verdicts by what a call states: a decode loop asks the same question each step
        self._seen: dict[Any, Verdict] = {}

    def judge(
        self, rec: dict[str, Any], values: dict[str, Any], tensors: dict[str, TensorFacts | None]
    ) -> Verdict:
        """Errors and warnings of the record about a call (``values``: every scalar by
        schema name, defaults included; ``tensors``: every tensor parameter)."""
        params = rec.get("parameters") or []
        scalars = [(p["name"], values.get(p["name"])) for p in params if not _is_tensor(p)]
        key = (rec["name"], repr(scalars), repr(tensors))
        if key not in self._seen:
            if len(self._seen) > _REMEMBERED:
                self._seen.clear()
            self._seen[key] = self._judge(rec, values, tensors)
        return self._seen[key]

    def _judge(
        self, rec: dict[str, Any], values: dict[str, Any], tensors: dict[str, TensorFacts | None]
    ) -> Verdict:
        verdict = Verdict()
        widened = WIDENED.get(rec["name"], {})
        cand = Candidate(
            index=0,
            kind="fusion",
            operator=rec["name"],
            stated={"module", "operator", "args", "tensors"},
        )
        for p in rec.get("parameters") or []:
            name = p["name"]
            if _is_tensor(p):
                facts = tensors.get(name)
                cand.tensors[name] = None if facts is None else self._spec(p, facts, verdict)
            else:
                value = _scalar(p, values.get(name))
                if value in widened.get(name, ()):
                    continue  # a value the reference adds to the record (see below): unstated
                cand.args[name] = value
        doc = Document(file="<emulated call>", text="", target=self.target, candidates=[cand])
        doc.target_stated = True
        for rule in self.rules:
            for f in rule.check(doc, self.ctx):
                if f.severity == "error":
                    verdict.errors.append(f)
                elif f.severity == "warning":
                    verdict.warnings.append(f)
        return verdict

    @staticmethod
    def _spec(p: dict[str, Any], facts: TensorFacts, verdict: Verdict) -> TensorSpec:
        fmt = facts.format
        if fmt is None:
            base = [f for f in p.get("formats") or [] if f in BASE_FORMATS]
            fmt = base[0] if base else "ND"
            verdict.never_cast.append(p["name"])
        return TensorSpec(dtype=facts.dtype, format=fmt, shape=list(facts.shape))

    def unknown(self, rec: dict[str, Any], names: list[str]) -> str:
        """``kb check``'s words (KB104) for keywords ``rec``'s operator does not take."""
        cand = Candidate(
            index=0,
            kind="fusion",
            operator=rec["name"],
            passed=set(names),
            stated={"module", "operator"},
        )
        doc = Document(file="<emulated call>", text="", target=self.target, candidates=[cand])
        found = [f.message for r in self.rules if r.code == "KB104" for f in r.check(doc, self.ctx)]
        return "; ".join(found)
