"""KB111–KB112: settings that are accepted but do nothing (reserved parameters, settings a
kernel ignores in a mode or on a product): warnings, the call itself runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kb.check.conditions import as_number, same
from kb.check.rules.operator import _HEAD, record_violations
from kb.lint.context import Context
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document
from kb.lint.unit import CandidateRule


class ReservedArgument(CandidateRule):
    code = "KB111"
    name = "reserved-argument"
    severity = "warning"
    summary = "A reserved parameter is set to something other than its default."
    why = (
        "Upstream keeps some parameters in the schema for later use and ignores them today "
        "(inner_k_tiles of npu_convert_weight_to_int4pack, for example). A value there has no "
        "effect, so the setting it was meant to make does not happen."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.mlp.down_proj\n"
        "    operator: npu_convert_weight_to_int4pack\n    args: {inner_k_tiles: 8}\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.mlp.down_proj\n"
        "    operator: npu_convert_weight_to_int4pack\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        if rec is None:
            return
        for name, p in ctx.parameters(rec).items():
            if not p.get("reserved"):
                continue
            if name in cand.args and cand.args[name] is not None:
                value = cand.args[name]
                if p.get("default") is not None and same(value, _literal(p["default"])):
                    continue
                yield self.on(
                    doc,
                    cand,
                    ("args", name),
                    f"{name} is reserved in {rec['name']} and ignored; leave it at its "
                    f"default ({p.get('default')})",
                )
            elif name in cand.tensors and cand.tensors[name] is not None:
                yield self.on(
                    doc,
                    cand,
                    ("tensors", name),
                    f"{name} is reserved in {rec['name']} and ignored; do not pass it",
                    key=True,
                )


def _literal(text: str) -> object:
    """A schema default as a value: ``1e-05`` → 1e-05, ``"PA_BSND"`` → PA_BSND, ``True``."""
    t = text.strip()
    if t in ("True", "False"):
        return t == "True"
    if t == "None":
        return None
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        return t[1:-1]
    num = as_number(t)
    return num if num is not None else t


class IgnoredSetting(CandidateRule):
    code = "KB112"
    name = "ignored-setting"
    severity = "warning"
    summary = "A setting that upstream ignores in this situation (the call runs, the setting does nothing)."
    why = (
        "Some record rules describe settings a kernel accepts but does not read on a product "
        "or in a mode, such as a rotary_mode on a kernel that only computes 'half'. The call "
        "succeeds, so it is not an error, but the result is not what the setting asks for."
    )
    fail = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: model.layers.*.self_attn.rotary_emb\n"
        "    operator: npu_apply_rotary_pos_emb\n    args: {rotary_mode: interleave}\n"
    )
    fix = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: model.layers.*.self_attn.rotary_emb\n"
        "    operator: npu_apply_rotary_pos_emb\n    args: {rotary_mode: half}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        seen: set[tuple[str, tuple[Any, ...]]] = set()
        for v in record_violations(ctx, doc, cand):
            if v.severity != "warning" or v.kind == "require-unstated" or (v.kind, v.path) in seen:
                continue
            seen.add((v.kind, v.path))
            yield self.on(doc, cand, v.path, f"{v.detail}: {v.message}", key=v.key)


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "Operator calls"

RULES = (ReservedArgument(), IgnoredSetting())
