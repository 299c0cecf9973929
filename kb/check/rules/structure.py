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
from kb.lint.suppress import ignore_comments
from kb.lint.unit import RuleUnit


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
FAMILY = file.FAMILY

RULES = (*file.RULES, BadIgnoreComment())
