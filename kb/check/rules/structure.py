"""KB0xx: the file itself — syntax, types, fields, vocabularies, ignore comments.

The parser (:mod:`kb.check.parse`) finds KB001–KB005 while it reads the file, since
only it knows where each key and value is; these units carry their documentation and
hand the parser's findings through, so ``--select``/``--ignore`` treat them like any rule.
"""

from __future__ import annotations

from collections.abc import Iterator

from kb.check import parse
from kb.lint.context import Context
from kb.lint.findings import Finding
from kb.lint.model import Document
from kb.lint.suppress import ignore_comments
from kb.lint.unit import RuleUnit

_HEAD = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
_NORM = "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"


class StructureRule(RuleUnit):
    """Documentation for a finding the parser makes; ``check`` adds nothing."""


class Syntax(StructureRule):
    code = parse.SYNTAX
    name = "syntax"
    summary = "The file is not valid YAML or JSON (or is refused: alias bomb, nesting too deep)."
    why = (
        "Nothing else can be checked until the file parses. The finding points at the line "
        "where the parser gave up, which is often just after the real mistake."
    )
    fail = (
        _HEAD
        + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n    args: {epsilon: 1.0e-6\n"
    )
    fix = (
        _HEAD
        + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n    args: {epsilon: 1.0e-6}\n"
    )


class WrongType(StructureRule):
    code = parse.WRONG_TYPE
    name = "wrong-type"
    summary = "A value has the wrong type (a mapping where a list belongs, text for a number …)."
    why = (
        "A value of the wrong shape cannot be read, so every rule that needs it stays silent. "
        "The most common slip is forgetting the '- ' that makes candidates a list."
    )
    fail = _HEAD + "  module: model.layers.*.input_layernorm\n  operator: npu_rms_norm\n"
    fix = _HEAD + _NORM


class UnknownField(StructureRule):
    code = parse.UNKNOWN_FIELD
    name = "unknown-field"
    summary = "A key that the candidate-list format does not define (usually a typo)."
    why = (
        "A misspelt key (phases, prerequisite, max-size) is silently meaningless: the value "
        "you wrote is never checked. Unknown keys are errors so typos cannot hide."
    )
    fail = _HEAD + _NORM + "    phases: decode\n"
    fix = _HEAD + _NORM + "    phase: decode\n"


class MissingField(StructureRule):
    code = parse.MISSING_FIELD
    name = "missing-field"
    summary = "A required field is missing (target.product, candidates, a candidate's module or operator, a prefetch target)."
    why = (
        "These fields are what the other rules key on: without the product nothing can be "
        "judged for it, without the operator a fusion candidate says nothing checkable."
    )
    fail = _HEAD + "  - module: model.layers.*.input_layernorm\n    phase: decode\n"
    fix = (
        _HEAD
        + "  - module: model.layers.*.input_layernorm\n    phase: decode\n    operator: npu_rms_norm\n"
    )


class UnknownValue(StructureRule):
    code = parse.UNKNOWN_VALUE
    name = "unknown-value"
    summary = "A value outside its vocabulary: product, phase, status, kind, dtype, format, quantization, graph mode, version."
    why = (
        "Products, dtypes, formats and schemes are controlled ids with aliases (A3, bf16, nz, "
        "torch.bfloat16 all work). A value that matches none cannot be compared with records."
    )
    fail = "version: 1\ntarget: {product: atlas-a4}\ncandidates:\n" + _NORM
    fix = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n" + _NORM


class BadIgnoreComment(RuleUnit):
    code = "KB006"
    name = "bad-ignore-comment"
    severity = "warning"
    summary = "A '# kb: ignore[…]' comment names no rule, or names no code at all."
    why = (
        "A suppression that matches nothing is a typo that leaves the finding in place, or a "
        "leftover after a rule was renamed; a bare '# kb: ignore' is not honoured, write the codes."
    )
    fail = (_HEAD + "  - module: model.layers.*.input_layernorm\n"
            "    operator: npu_rms_norm  # kb: ignore[KB999]\n")  # fmt: skip
    fix = (_HEAD + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
           "    args: {eps: 1.0e-6}  # kb: ignore[KB104]\n")  # fmt: skip

    def check(self, doc: Document, ctx: Context) -> Iterator[Finding]:
        codes = ctx.codes
        if doc.located is None:
            return
        for ig in ignore_comments(doc.text, doc.located):
            if not ig.codes:
                yield Finding(doc.file, ig.line, ig.column, self.code, self.severity,
                              "'# kb: ignore' needs the codes it silences, e.g. "
                              "'# kb: ignore[KB104]'")  # fmt: skip
            for code in ig.codes:
                if not any(c.startswith(code) for c in codes):
                    yield Finding(doc.file, ig.line, ig.column, self.code, self.severity,
                                  f"'# kb: ignore[{code}]' matches no rule; 'kb rules' lists the codes")  # fmt: skip


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "The input file"

RULES = (Syntax(), WrongType(), UnknownField(), MissingField(), UnknownValue(), BadIgnoreComment())
