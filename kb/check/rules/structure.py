"""KB0xx: the file itself — syntax, types, fields, vocabularies, ignore comments.

KB001–KB005 are emitted by the parser (:mod:`kb.check.rules.file`); this module adds
the file-level rules that run after parsing.
"""

from __future__ import annotations

from collections.abc import Iterator

from kb.check.rules import file
from kb.check.rules.file import HEAD as _HEAD
from kb.lint.context import Context
from kb.lint.findings import Finding
from kb.lint.model import Document
from kb.lint.suppress import BAD_IGNORE_CODE, ignore_comments, problems
from kb.lint.unit import RuleUnit


class BadIgnoreComment(RuleUnit):
    code = BAD_IGNORE_CODE
    name = "bad-ignore-comment"
    severity = "warning"
    summary = "A '# kb: ignore[…]' comment is malformed, names no rule, or names no code at all."
    why = (
        "A suppression that matches nothing is a typo that leaves the finding in place, or a "
        "leftover after a rule was renamed; a bare '# kb: ignore' is not honoured, write the codes. "
        "A malformed one ('# kb: ignore KB106', an unclosed '[') silences nothing."
    )
    #: ``kb scan`` reports the same problems in Python comments (kb.scan.engine).
    fronts = ("check", "scan")
    fail = (
        _HEAD + "  - module: model.layers.*.input_layernorm\n"
        "    operator: npu_rms_norm  # kb: ignore[KB999]\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    args: {eps: 1.0e-6}  # kb: ignore[KB104]\n"
    )

    def check(self, doc: Document, ctx: Context) -> Iterator[Finding]:
        if doc.located is None or not doc.text:
            return
        for ig in ignore_comments(doc.text, doc.located):
            for message in problems(ig, ctx.codes):
                yield Finding(doc.file, ig.line, ig.column, self.code, self.severity, message)


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = file.FAMILY

RULES = (*file.RULES, BadIgnoreComment())
