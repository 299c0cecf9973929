"""KB1xx: is the operator real and current, and is it called with what it accepts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from kb.check.conditions import Violation, one_of, violations
from kb.lint.context import Context, Record
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document
from kb.lint.unit import CandidateRule
from kb.vocab import STATUS_RANK, missing_call_path, product_support

_HEAD = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"


def _is_tensor(param: dict[str, Any]) -> bool:
    return str(param.get("type", "")).startswith("Tensor")


def _suggest(name: str, choices: list[str], ctx: Context | None = None) -> str:
    """`` (did you mean …?)`` for a misspelt name; with ``ctx``, worked out once per run
    for the same name and choices (a long list repeats one typo in every layer)."""
    key = ("suggest", name, tuple(choices))
    if ctx is not None and key in ctx.memo:
        return ctx.memo[key]  # type: ignore[no-any-return]
    from kb.core.fuzzy import suggest

    hits = suggest(name, choices, limit=3)
    hint = f" (did you mean {', '.join(hits)}?)" if hits else ""
    if ctx is not None:
        ctx.memo[key] = hint
    return hint


def successor(ctx: Context, rec: Record) -> tuple[str | None, list[str]]:
    """The first non-deprecated operator down the ``superseded_by`` line, and the path."""
    seen = {rec["name"]}
    path: list[str] = []
    current = rec
    while current.get("superseded_by"):
        nxt_name = current["superseded_by"]
        path.append(nxt_name)
        nxt = ctx.operator(nxt_name)
        if nxt is None or nxt["name"] in seen or nxt.get("status") != "deprecated":
            return nxt_name, path
        seen.add(nxt["name"])
        current = nxt
    return (path[-1] if path else None), path


class UnknownOperator(CandidateRule):
    code = "KB101"
    name = "unknown-operator"
    severity = "error"
    kinds = ("fusion", "prefetch")
    skip_not_applicable = False
    summary = "The operator is not in the knowledge base (typo, or not a torch_npu operator)."
    why = (
        "Every other check of a candidate starts from its operator record. A misspelt name "
        "(npu_mla_prolog_v4) would fail at import time on the NPU; kb suggests the closest "
        "known names. If the operator is real but missing here, add a record for it. A known "
        "operator written under a path that does not exist (torch_npu.npu_ring_mla, which "
        "op-plugin only attaches to torch_npu.atb) fails the same way and is reported here too."
    )
    fail = (
        _HEAD
        + "  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v4\n"
    )
    fix = (
        _HEAD
        + "  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v3\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        if not cand.operator:
            return
        rec = ctx.record(cand.operator)
        if rec is not None and rec.get("kind") == "operator":
            paths = missing_call_path(cand.operator, rec.get("calls") or [])
            if paths:  # torch_npu.npu_ring_mla: the function is torch_npu.atb.npu_ring_mla
                yield self.on(
                    doc,
                    cand,
                    ("operator",),
                    f"{cand.operator!r} does not exist "
                    f"(AttributeError); {rec['name']} is called as {' or '.join(paths)}",
                )
            return
        if rec is None and ctx.known(cand.operator):
            return  # a torch_npu operator without a record (KB120)
        if rec is not None:
            msg = (
                f"{cand.operator!r} names a {rec.get('kind')}, not an operator; put the "
                f"operator the candidate calls here"
            )
            if rec.get("kind") == "chain":
                msg += f" and the chain under 'chain: {rec['name']}'"
        else:
            hint = _suggest(cand.operator, ctx.names("operator"), ctx)
            msg = f"unknown operator {cand.operator!r}{hint}; check the spelling with 'kb search'"
        yield self.on(doc, cand, ("operator",), msg)


class DeprecatedOperator(CandidateRule):
    code = "KB102"
    name = "deprecated-operator"
    severity = "warning"
    kinds = ("fusion", "prefetch")
    summary = "The operator is deprecated upstream; the message names its successor."
    why = (
        "Deprecated kernels stop receiving fixes and new product support, and may be removed "
        "in a later torch_npu. A new replacement plan should start from the successor."
    )
    fail = (
        _HEAD
        + "  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v2\n"
    )
    fix = (
        _HEAD
        + "  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v3\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec, path = ctx.operator_of(cand)
        if rec is None or rec.get("status") != "deprecated":
            return
        nxt, line = successor(ctx, rec)
        if nxt:
            via = f" (via {', '.join(line[:-1])})" if len(line) > 1 else ""
            msg = f"{rec['name']} is deprecated: use {nxt}{via} instead"
            if ctx.operator(nxt) is not None:
                msg += f"; 'kb show {nxt}' lists what changed"
        else:
            note = rec.get("replacement_note") or "see 'kb show' for the replacement"
            msg = f"{rec['name']} is deprecated: {note}"
        yield self.at(doc, path, msg, candidate=cand.index)


class SupersededOperator(CandidateRule):
    code = "KB103"
    name = "superseded-operator"
    severity = "info"
    kinds = ("fusion",)
    summary = "A newer, equally documented version of the operator exists (the old one is not deprecated)."
    why = (
        "Successor versions usually add layouts, quantization modes or products. Keeping the "
        "older one can be right (an older torch_npu, a proven path), but it should be a choice. "
        "A successor with less documentation (beta or undocumented) is not suggested."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_fused_infer_attention_score\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_fused_infer_attention_score_v2\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        if rec is None or rec.get("status") == "deprecated" or not rec.get("superseded_by"):
            return
        nxt = rec["superseded_by"]
        successor = ctx.operator(nxt)
        if successor is not None and STATUS_RANK.get(
            str(successor.get("status")), 0
        ) < STATUS_RANK.get(str(rec.get("status")), 0):
            return
        yield self.on(
            doc,
            cand,
            ("operator",),
            f"{rec['name']} has a successor, {nxt}; prefer it unless your torch_npu "
            f"lacks it ('kb show {nxt}' lists what changed)",
        )


class UnknownArgument(CandidateRule):
    code = "KB104"
    name = "unknown-argument"
    severity = "error"
    summary = "An argument or tensor name is not a parameter of the operator's signature."
    why = (
        "torch_npu operators take keyword arguments by their schema names; an unknown name "
        "raises a TypeError at the first call, and a near-miss (eps for epsilon) hides the "
        "value you meant to set."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    args: {eps: 1.0e-6}\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    args: {epsilon: 1.0e-6}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        known = None if rec else ctx.known(cand.operator)
        params = (
            ctx.parameters(rec) if rec else dict.fromkeys(known.arg_names() or ()) if known else {}
        )
        if not params:
            return
        rec = rec or {"name": known.name if known else cand.operator}
        outputs = {r.get("name") for r in rec.get("returns") or []}
        passed = {n: None for n in sorted(cand.passed)}
        for section, names in (("args", cand.args), ("tensors", cand.tensors), ("passed", passed)):
            for name in names:
                if name in params:
                    continue
                if name in outputs:
                    msg = (
                        f"{name!r} is an output of {rec['name']}, not a parameter; "
                        "remove it from the candidate's inputs"
                    )
                else:
                    hint = _suggest(name, list(params), ctx)
                    msg = f"{rec['name']} has no parameter {name!r}{hint}"
                yield self.on(doc, cand, (section, name), msg, key=True)


class ArgumentKind(CandidateRule):
    code = "KB105"
    name = "argument-kind"
    severity = "warning"
    summary = "A tensor parameter is listed under args, or a scalar parameter under tensors."
    why = (
        "args holds the scalar values kb checks against allowed values and ranges; tensors "
        "holds dtype, format and shape. Swapping them means neither check can run."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    args: {gamma: input_layernorm.weight}\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    tensors:\n      gamma: {dtype: bfloat16}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        params = ctx.parameters(rec) if rec else {}
        for name, value in cand.args.items():
            p = params.get(name)
            if p is not None and _is_tensor(p) and value is not None:
                yield self.on(
                    doc,
                    cand,
                    ("args", name),
                    f"{name} is a tensor parameter ({p.get('type')}); describe it under "
                    f"tensors: {{{name}: {{dtype: …, format: …}}}}",
                    key=True,
                )
        for name, spec in cand.tensors.items():
            p = params.get(name)
            if p is not None and not _is_tensor(p) and spec is not None:
                yield self.on(
                    doc,
                    cand,
                    ("tensors", name),
                    f"{name} is a {p.get('type')} argument, not a tensor; give its value "
                    f"under args: {{{name}: …}}",
                    key=True,
                )


def _tensor_mismatches(
    ctx: Context, cand: Candidate, attr: str, record_key: str
) -> Iterator[tuple[dict[str, Any], str, list[str], str]]:
    """(record, tensor, allowed, stated) for each stated tensor ``attr`` its record rejects."""
    rec = ctx.operator(cand.operator)
    if rec is None:
        return
    params = ctx.parameters(rec)
    for name, spec in cand.tensors.items():
        p = params.get(name)
        stated = None if p is None or spec is None else getattr(spec, attr)
        allowed = (p or {}).get(record_key) or []
        if stated is not None and allowed and stated not in allowed:
            yield rec, name, allowed, stated


class DtypeNotSupported(CandidateRule):
    code = "KB107"
    name = "dtype-not-supported"
    severity = "error"
    summary = "A tensor's dtype is not one its parameter accepts."
    why = (
        "An unsupported dtype fails in the kernel's dtype check, or forces a cast that costs "
        "the bandwidth the fusion was meant to save. Cast before the call or pick the "
        "operator variant for that dtype."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    tensors:\n      self: {dtype: int8}\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    tensors:\n      self: {dtype: bfloat16}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        for rec, name, allowed, stated in _tensor_mismatches(ctx, cand, "dtype", "dtypes"):
            yield self.on(
                doc,
                cand,
                ("tensors", name, "dtype"),
                f"{rec['name']} takes {name} as {', '.join(allowed)}, not "
                f"{stated}; cast it or use another operator",
            )


class FormatNotSupported(CandidateRule):
    code = "KB108"
    name = "format-not-supported"
    severity = "error"
    summary = "A tensor's storage format (ND, FRACTAL_NZ, …) is not one its parameter accepts."
    why = (
        "Several fused operators read weights only in FRACTAL_NZ (or only ND). A wrong format "
        "fails at run time or silently computes garbage; convert once at load time with "
        "torch_npu.npu_format_cast."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_mla_prolog_v3\n    tensors:\n      weight_dq: {format: ND}\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_mla_prolog_v3\n    tensors:\n      weight_dq: {format: FRACTAL_NZ}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        for rec, name, allowed, stated in _tensor_mismatches(ctx, cand, "format", "formats"):
            fix = (
                " (torch_npu.npu_format_cast(t, 29) converts to FRACTAL_NZ)"
                if "FRACTAL_NZ" in allowed
                else ""
            )
            yield self.on(
                doc,
                cand,
                ("tensors", name, "format"),
                f"{rec['name']} takes {name} in {', '.join(allowed)}, not {stated}{fix}",
            )


def record_violations(ctx: Context, doc: Document, cand: Candidate) -> list[Violation]:
    """The fired record rules' contradictions for a candidate, computed once per run."""
    if "violations" not in cand.memo:
        rec = ctx.operator(cand.operator)
        cand.memo["violations"] = list(violations(rec, cand, doc.target)) if rec else []
    return cand.memo["violations"]  # type: ignore[no-any-return]


class OperatorRule(CandidateRule):
    code = "KB109"
    name = "operator-rule"
    severity = "error"
    summary = "A conditional rule of the operator's record is broken (dtype, format, value, product, forbidden argument)."
    why = (
        "Many constraints hold only in a mode: with weight_quant_mode=2 the weights are int8, "
        "a paged cache_mode needs cache_index, bfloat16 is absent on older products. Records "
        "state these as rules; a rule applies only when everything in its 'when' is stated."
    )
    fail = (
        "version: 1\ntarget: {product: atlas-inference}\ncandidates:\n"
        "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    tensors:\n      self: {dtype: bfloat16}\n"
    )
    fix = (
        "version: 1\ntarget: {product: atlas-inference}\ncandidates:\n"
        "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
        "    tensors:\n      self: {dtype: float16}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        if rec is None:
            return
        params = ctx.parameters(rec)
        products = rec.get("products") or []
        seen: set[tuple[str, tuple[Any, ...]]] = set()
        for v in record_violations(ctx, doc, cand):
            if v.kind == "require-unstated" or (v.kind, v.path) in seen or v.severity != "error":
                continue
            if self._duplicate(v, cand, params, products, doc):
                continue
            seen.add((v.kind, v.path))
            found = self.on(doc, cand, v.path, f"{v.detail}: {v.message}", key=v.key)
            # the target may or may not be one of the sub-series: verify, not refuse
            yield replace(found, severity="warning") if v.kind == "product-sub-series" else found

    @staticmethod
    def _duplicate(
        v: Violation,
        cand: Candidate,
        params: dict[str, dict[str, Any]],
        products: list[str],
        doc: Document,
    ) -> bool:
        """Skip what KB106/KB107/KB108/KB201 already report from the parameter itself."""
        p = params.get(v.subject, {})
        spec = cand.tensors.get(v.subject)
        if v.kind == "dtype" and spec is not None and p.get("dtypes"):
            return spec.dtype not in p["dtypes"]
        if v.kind == "format" and spec is not None and p.get("formats"):
            return spec.format not in p["formats"]
        if v.kind == "value" and p.get("allowed") is not None:
            return not one_of(cand.args.get(v.subject), p["allowed"])
        if v.kind in ("product", "product-sub-series") and products:
            # KB201/KB208/KB209 speak when the record's products do not cover the target
            return product_support(str(doc.target.product), products) != "yes"
        return False


class RuleRequiresArgument(CandidateRule):
    code = "KB110"
    name = "rule-requires-argument"
    severity = "info"
    summary = "What the candidate states makes another argument necessary that it does not mention."
    why = (
        "A mode often brings companions: a paged cache_mode needs cache_index, int8 weights "
        "need their dequant scales. The candidate does not say whether it passes them, so this "
        "is a reminder, not an error; list them under tensors or args to make it go away."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_mla_prolog_v3\n    args: {cache_mode: PA_BSND}\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_mla_prolog_v3\n    args: {cache_mode: PA_BSND}\n"
        "    tensors:\n      cache_index: {dtype: int64}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        for v in record_violations(ctx, doc, cand):
            if v.kind == "require-unstated":
                yield self.on(doc, cand, v.path, f"{v.detail}: {v.message}")


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "Operator calls"

RULES = (
    UnknownOperator(),
    DeprecatedOperator(),
    SupersededOperator(),
    UnknownArgument(),
    ArgumentKind(),
    DtypeNotSupported(),
    FormatNotSupported(),
    OperatorRule(),
    RuleRequiresArgument(),
)
