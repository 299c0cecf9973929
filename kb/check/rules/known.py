"""KB12x: what upstream facts say beyond the records.

* KB120: an operator torch_npu defines (its wheel's schema file, op-plugin's config, the
  ATB registrations) that has no record.  Real code calls it, so it is not "unknown"
  (KB101): it is known but not documented here, and the finding shows its schema.
* KB121: a value outside the documented allowed set that the vendor's own code passes,
  as recorded in the record's ``evidence`` (``kind: shipping-code`` or ``source``,
  ``about: [parameters.<name>.allowed]``, ``values: [...]``).  The evidence is data in
  the record; without it the same value stays a KB106 error.
"""

from __future__ import annotations

from collections.abc import Iterator

from kb.check.rules.scalars import ValueNotAllowed
from kb.lint.context import Context
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document
from kb.lint.unit import CandidateRule

_HEAD = "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
_HEAD_950 = "version: 1\ntarget: {product: ascend-950}\ncandidates:\n"
_ROLE_NOTE = {
    "backward": "; it is a backward kernel, which autograd calls for its forward operator",
    "internal": "; the leading underscore marks it internal to torch_npu (its Python wrappers "
    "call it)",
    "forward": "",
}


def _note(role: str, namespace: str) -> str:
    if namespace == "atb":
        return "; it is an ATB operator, called as torch.ops.atb.NAME"
    return _ROLE_NOTE[role]


def schema_text(schemas: tuple[str, ...]) -> str:
    """The schema(s) for a message: one inline, several joined with ' | '."""
    return f"schema {' | '.join(schemas)}" if schemas else "no published schema"


class OperatorWithoutRecord(CandidateRule):
    code = "KB120"
    name = "operator-without-record"
    severity = "info"
    kinds = ("fusion", "prefetch")
    skip_not_applicable = False
    summary = "A real torch_npu operator (upstream defines its schema) that has no record here."
    why = (
        "torch_npu ships more operators than anyone documents: private helpers such as "
        "_npu_dtype_cast, backward kernels, ATB operators under torch.ops.atb, operators "
        "newer than the records. Calling one is not a mistake, so kb does not call it "
        "unknown; it shows the schema from the wheel (or op-plugin) and checks the argument "
        "names against it, but it knows no dtypes, products or limits. Backward and "
        "underscore operators are known the same way: autograd and the torch_npu wrappers "
        "reach them, and a training stack may call them itself. Prefer the documented "
        "forward operator when one exists."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.self_attn.core\n    phase: training\n"
        "    operator: npu_fusion_attention_grad\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.self_attn.core\n    phase: training\n"
        "    operator: npu_fusion_attention\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        if not cand.operator or ctx.record(cand.operator) is not None:
            return
        known = ctx.known(cand.operator)
        if known is None:
            return
        yield self.on(
            doc,
            cand,
            ("operator",),
            f"{known.name} is a torch_npu operator known from {known.origin} but has "
            f"no record: {schema_text(known.schemas)}{_note(known.role, known.namespace)}; "
            + (
                "kb checks only its argument names"
                if known.schemas
                else "kb cannot check its arguments"
            ),
        )


class VendorValue(ValueNotAllowed):
    code = "KB121"
    name = "value-from-vendor-code"
    severity = "warning"
    vendor = True
    summary = "A value outside the documented set that the vendor's own code passes (evidence in the record)."
    why = (
        "The reference page lists the values it promises; vendor code sometimes passes one "
        "the page omits (a newer mode, a value only a later kernel accepts). The record "
        "cites that code in its evidence, so kb warns instead of rejecting: the call works "
        "where the vendor runs it, but nothing documents it, and it may change without notice. "
        "A value no evidence names stays a KB106 error."
    )
    fail = (
        _HEAD_950 + "  - module: transformer.blocks.*.attn.core\n    phase: prefill\n"
        "    operator: npu_fused_infer_attention_score_v2\n    args: {query_quant_mode: 7}\n"
    )
    fix = (
        _HEAD_950 + "  - module: transformer.blocks.*.attn.core\n    phase: prefill\n"
        "    operator: npu_fused_infer_attention_score_v2\n    args: {query_quant_mode: 0}\n"
    )


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "Operator calls"

RULES = (OperatorWithoutRecord(), VendorValue())
