"""KB001–KB005: what the parser finds while it reads a candidate list.

Only the parser (:mod:`kb.check.parse`) knows where each key and value is, so it emits
these units' findings itself (``SYNTAX.finding(...)``); the units carry the code,
severity and documentation, so ``--select``/``--ignore``, ``kb rules`` and the site
treat them like every other rule.
"""

from __future__ import annotations

from kb.lint.unit import RuleUnit

#: The head of every snippet: a minimal valid candidate list.
HEAD = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
_NORM = "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"


class FileRule(RuleUnit):
    """A finding the parser makes while it reads the file; ``check`` adds nothing."""


class Syntax(FileRule):
    code = "KB001"
    name = "syntax"
    summary = "The file is not valid YAML or JSON (or is refused: alias bomb, nesting too deep)."
    why = (
        "Nothing else can be checked until the file parses. The finding points at the line "
        "where the parser gave up, which is often just after the real mistake."
    )
    fail = (
        HEAD
        + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n    args: {epsilon: 1.0e-6\n"
    )
    fix = (
        HEAD
        + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n    args: {epsilon: 1.0e-6}\n"
    )


class WrongType(FileRule):
    code = "KB002"
    name = "wrong-type"
    summary = "A value has the wrong type (a mapping where a list belongs, text for a number …)."
    why = (
        "A value of the wrong shape cannot be read, so every rule that needs it stays silent. "
        "The most common slip is forgetting the '- ' that makes candidates a list."
    )
    fail = HEAD + "  module: model.layers.*.input_layernorm\n  operator: npu_rms_norm\n"
    fix = HEAD + _NORM


class UnknownField(FileRule):
    code = "KB003"
    name = "unknown-field"
    summary = "A key that the candidate-list format does not define (usually a typo)."
    why = (
        "A misspelt key (phases, prerequisite, max-size) is silently meaningless: the value "
        "you wrote is never checked. Unknown keys are errors so typos cannot hide."
    )
    fail = HEAD + _NORM + "    phases: decode\n"
    fix = HEAD + _NORM + "    phase: decode\n"


class MissingField(FileRule):
    code = "KB004"
    name = "missing-field"
    summary = "A required field is missing (target.product, candidates, a candidate's module or operator, a prefetch target)."
    why = (
        "These fields are what the other rules key on: without the product nothing can be "
        "judged for it, without the operator a fusion candidate says nothing checkable."
    )
    fail = HEAD + "  - module: model.layers.*.input_layernorm\n    phase: decode\n"
    fix = (
        HEAD
        + "  - module: model.layers.*.input_layernorm\n    phase: decode\n    operator: npu_rms_norm\n"
    )


class UnknownValue(FileRule):
    code = "KB005"
    name = "unknown-value"
    summary = "A value outside its vocabulary: product, phase, status, kind, dtype, format, quantization, graph mode, version."
    why = (
        "Products, dtypes, formats and schemes are controlled ids with aliases (A3, bf16, nz, "
        "torch.bfloat16 all work). A value that matches none cannot be compared with records."
    )
    fail = "version: 1\ntarget: {product: atlas-a4}\ncandidates:\n" + _NORM
    fix = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n" + _NORM


#: The family title of this module's codes (shared with :mod:`kb.check.rules.structure`).
FAMILY = "The input file"

SYNTAX = Syntax()
WRONG_TYPE = WrongType()
UNKNOWN_FIELD = UnknownField()
MISSING_FIELD = MissingField()
UNKNOWN_VALUE = UnknownValue()
RULES = (SYNTAX, WRONG_TYPE, UNKNOWN_FIELD, MISSING_FIELD, UNKNOWN_VALUE)
