"""KB2xx: does the operator exist for the target product, torch_npu, quantization, phase, graph mode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kb.check.conditions import same
from kb.check.context import Context, Record
from kb.check.findings import Finding
from kb.check.model import Candidate, Document
from kb.check.rules.base import CandidateRule
from kb.check.values import version_before

_CAND = "candidates:\n  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v3\n"
_GATE = (
    "candidates:\n  - module: model.layers.*.mlp.gate\n    operator: npu_moe_gating_top_k_softmax\n"
)

#: Scheme names that describe the same kernels at the level a candidate list is written:
#: "w8a8" covers the per-token (dynamic) activation variant and vice versa.
SCHEME_FAMILY: dict[str, tuple[str, ...]] = {
    "w8a8": ("w8a8", "w8a8-dynamic"),
    "w8a8-dynamic": ("w8a8-dynamic", "w8a8"),
}


class ProductNotSupported(CandidateRule):
    code = "KB201"
    name = "product-not-supported"
    severity = "error"
    kinds = ("fusion", "prefetch")
    summary = "The operator is not supported on the target product."
    why = (
        "Fused kernels ship per chip generation; an operator marked only for Atlas A2/A3 has "
        "no kernel on the Atlas inference series. The plan needs another operator or product."
    )
    fail = "version: 1\ntarget: {product: atlas-inference}\n" + _CAND
    fix = "version: 1\ntarget: {product: atlas-a3}\n" + _CAND

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec, path = ctx.operator_of(cand)
        product = doc.target.product
        products = rec.get("products") if rec else None
        if rec is None or product is None or not products or product in products:
            return
        yield self.at(doc, path, f"{rec['name']} is not supported on {product} (supported: "
                      f"{', '.join(products)}); choose another operator or target product",
                      candidate=cand.index)  # fmt: skip


class TorchNpuTooOld(CandidateRule):
    code = "KB202"
    name = "torch-npu-too-old"
    severity = "error"
    kinds = ("fusion", "prefetch")
    summary = (
        "The target torch_npu release does not have the operator (too old, or after its removal)."
    )
    why = (
        "An operator missing from the installed torch_npu fails with AttributeError on the "
        "first call. Either upgrade torch_npu or plan with an operator your release has. "
        "Release facts come from the harvested torch_npu wheels (or the record's versions)."
    )
    fail = 'version: 1\ntarget: {product: atlas-a3, torch_npu: "2.1.0"}\n' + _CAND
    fix = 'version: 1\ntarget: {product: atlas-a3, torch_npu: "2.9.0"}\n' + _CAND

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec, path = ctx.operator_of(cand)
        typed = doc.target.torch_npu
        if rec is None or typed is None:
            return
        versions = rec.get("versions") or {}
        first, last = versions.get("first"), versions.get("last")
        release, exact = ctx.release(typed)
        has = ctx.record_has(rec, release) if release else None
        shown = typed if exact or release is None else f"{typed} (read as {release})"
        judged: str = release or typed
        if has is None:  # release unknown to the harvest: compare with first/last only
            has = not (
                (first and version_before(typed, first)) or (last and version_before(last, typed))
            )
            judged = typed
        if has:
            return
        if first and version_before(judged, first):
            msg = f"{rec['name']} first ships in torch_npu {first}; the target is {shown}"
            fix = "upgrade torch_npu or use an operator your release has"
        elif last and version_before(last, judged):
            msg = f"{rec['name']} was removed after torch_npu {last}; the target is {shown}"
            fix = "use its successor or an older torch_npu"
        else:
            later = _next_release(rec, judged)
            msg = f"{rec['name']} is missing from torch_npu {shown} (it ships from {first})"
            fix = (f"use torch_npu {later} or a later release that has it" if later
                   else "pick a release that has it ('kb show' lists them)")  # fmt: skip
        yield self.at(doc, path, f"{msg}: {fix}", candidate=cand.index)


def _next_release(rec: Record, release: str) -> str | None:
    """The first release after ``release`` that the record lists as having the operator."""
    from kb.releases import release_key

    start = release_key(release)
    for rel in (rec.get("versions") or {}).get("releases") or []:
        key = release_key(rel)
        if start is not None and key is not None and key > start:
            return str(rel)
    return None


class ArgumentNotInRelease(CandidateRule):
    code = "KB207"
    name = "argument-not-in-release"
    severity = "error"
    summary = "An argument the candidate uses is not in the operator's signature in the target torch_npu release."
    why = (
        "Operator signatures change between torch_npu releases (arguments are added, and "
        "some release lines lack arguments others have). A keyword your release does not "
        "know raises a TypeError at the first call."
    )
    fail = (
        'version: 1\ntarget: {product: atlas-a3, torch_npu: "2.9.1"}\ncandidates:\n'
        "  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v3\n"
        "    args: {kv_cache_dtype: null}\n"
    )
    fix = (
        'version: 1\ntarget: {product: atlas-a3, torch_npu: "2.10.0.post4"}\ncandidates:\n'
        "  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v3\n"
        "    args: {kv_cache_dtype: null}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        typed = doc.target.torch_npu
        if rec is None or typed is None:
            return
        release, _exact = ctx.release(typed)
        names = ctx.signature_names(rec, release) if release else None
        if release is None or names is None:
            return
        params = {p["name"] for p in rec.get("parameters") or []}
        for section, given in (("args", cand.args), ("tensors", cand.tensors)):
            for name in given:
                if name in params and name not in names:
                    later = ctx.release_with_argument(rec, name, release)
                    hint = f"; torch_npu {later} has it" if later else ""
                    yield self.on(doc, cand, (section, name),
                                  f"{name} is not in {rec['name']}'s signature in torch_npu "
                                  f"{release}{hint}: drop it or upgrade", key=True)  # fmt: skip


def _schemes(rec: Record, scheme: str) -> list[dict[str, Any]]:
    """The record's quantization modes for ``scheme`` (exact first, then its family)."""
    modes = rec.get("quantization") or []
    exact = [m for m in modes if m.get("scheme") == scheme]
    if exact:
        return exact
    family = SCHEME_FAMILY.get(scheme, ())
    return [m for m in modes if m.get("scheme") in family]


class QuantizationNotSupported(CandidateRule):
    code = "KB203"
    name = "quantization-not-supported"
    severity = "error"
    summary = (
        "The candidate's quantization scheme is not one the operator offers (on this product)."
    )
    why = (
        "Quantization decides the dtypes of every weight and activation the operator reads; a "
        "scheme the kernel has no mode for cannot be reached by any argument setting."
    )
    fail = "version: 1\ntarget: {product: atlas-a3}\n" + _GATE + "    quantization: w8a8\n"
    fix = "version: 1\ntarget: {product: atlas-a3}\n" + _GATE + "    quantization: bf16\n"

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        scheme = cand.quantization
        if rec is None or scheme is None or not rec.get("quantization"):
            return
        modes = _schemes(rec, scheme)
        offered = sorted({m.get("scheme", "") for m in rec["quantization"]})
        if not modes:
            yield self.on(doc, cand, ("quantization",),
                          f"{rec['name']} has no {scheme} mode (it offers {', '.join(offered)}); "
                          f"pick one of those or another operator")  # fmt: skip
            return
        product = doc.target.product
        if product is None:
            return
        ok = [m for m in modes if not m.get("products") or product in m["products"]]
        if not ok:
            where = sorted({p for m in modes for p in m.get("products", [])})
            yield self.on(doc, cand, ("quantization",),
                          f"{rec['name']} offers {scheme} only on {', '.join(where)}, not on "
                          f"{product}; use another scheme on this product")  # fmt: skip


class QuantizationMismatch(CandidateRule):
    code = "KB204"
    name = "quantization-mismatch"
    severity = "error"
    summary = "Arguments or tensor dtypes contradict the quantization scheme the candidate names."
    why = (
        "A scheme is selected by argument values (weight_quant_mode=2, quant_mode=0 …) and "
        "implies tensor dtypes. A candidate saying w8a8 while passing bfloat16 weights, or "
        "the bf16 mode with a quantized setting, will not run the scheme it claims."
    )
    fail = ("version: 1\ntarget: {product: atlas-a3}\n" + _GATE
            + "    quantization: bf16\n    tensors:\n      x: {dtype: float16}\n")  # fmt: skip
    fix = ("version: 1\ntarget: {product: atlas-a3}\n" + _GATE
           + "    quantization: bf16\n    tensors:\n      x: {dtype: bfloat16}\n")  # fmt: skip

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        scheme = cand.quantization
        if rec is None or scheme is None:
            return
        modes = _schemes(rec, scheme)
        if not modes:
            return  # KB203's business
        best: list[tuple[tuple[Any, ...], str]] | None = None
        for mode in modes:
            problems = list(self._mismatches(cand, mode, scheme))
            if not problems:
                return
            if best is None or len(problems) < len(best):
                best = problems
        explained = self._explained(ctx, doc, cand, rec)
        for path, msg in best or []:
            if path not in explained:
                yield self.on(doc, cand, path, f"{rec['name']} {msg}")

    @staticmethod
    def _explained(
        ctx: Context, doc: Document, cand: Candidate, rec: Record
    ) -> set[tuple[Any, ...]]:
        """Tensor dtypes already reported by KB107 (parameter) or KB109 (a record rule)."""
        from kb.check.rules.operator import record_violations

        paths = {v.path for v in record_violations(ctx, doc, cand) if v.kind == "dtype"}
        params = {p["name"]: p for p in rec.get("parameters") or []}
        for name, spec in cand.tensors.items():
            allowed = params.get(name, {}).get("dtypes")
            if (
                spec is not None
                and spec.dtype is not None
                and allowed
                and spec.dtype not in allowed
            ):
                paths.add(("tensors", name, "dtype"))
        return paths

    @staticmethod
    def _mismatches(cand: Candidate, mode: dict[str, Any],
                    scheme: str) -> Iterator[tuple[tuple[Any, ...], str]]:  # fmt: skip
        for arg, want in (mode.get("select") or {}).items():
            have = cand.args.get(arg)
            if have is not None and not isinstance(have, list) and not same(have, want):
                yield ("args", arg), f"selects {scheme} with {arg}={want}, not {have}"
        for name, dtypes in (mode.get("tensors") or {}).items():
            spec = cand.tensors.get(name)
            if spec is not None and spec.dtype is not None and spec.dtype not in dtypes:
                yield (
                    ("tensors", name, "dtype"),
                    f"in {scheme} takes {name} as {'/'.join(dtypes)}, not {spec.dtype}",
                )


class PhaseNotSupported(CandidateRule):
    code = "KB205"
    name = "phase-not-supported"
    severity = "warning"
    summary = "The operator is not documented for the candidate's phase (prefill or decode)."
    why = (
        "Some fused operators exist for one phase only (decode-only MC2 dispatch, prefill-only "
        "re-routing); their shape limits assume it. Use the phase's own operator or chain."
    )
    fail = ("version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
            "  - module: model.layers.*.mlp.experts\n    phase: decode\n    operator: npu_moe_re_routing\n")  # fmt: skip
    fix = ("version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
           "  - module: model.layers.*.mlp.experts\n    phase: prefill\n    operator: npu_moe_re_routing\n")  # fmt: skip

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        wanted = cand.phases()
        phases = rec.get("phases") if rec else None
        if rec is None or wanted is None or not phases:
            return
        missing = sorted(wanted - set(phases))
        if missing:
            yield self.on(doc, cand, ("phase",),
                          f"{rec['name']} is documented for {', '.join(phases)}, not "
                          f"{' or '.join(missing)}; split the candidate per phase or use the "
                          f"{'/'.join(missing)} operator")  # fmt: skip


class GraphModeNotSupported(CandidateRule):
    code = "KB206"
    name = "graph-mode-not-supported"
    severity = "error"
    kinds = ("fusion", "prefetch")
    summary = (
        "The operator is marked unsupported in the target's graph mode (aclgraph or torchair)."
    )
    why = (
        "Graph capture needs every op to be capturable; one unsupported op breaks the graph "
        "or falls back to eager for the whole region. Keep it out of the captured part."
    )
    fail = ("version: 1\ntarget: {product: atlas-a2, graph_mode: aclgraph}\ncandidates:\n"
            "  - module: model.layers.*.self_attn\n"
            "    phase: training\n    operator: npu_fusion_attention\n")  # fmt: skip
    fix = ("version: 1\ntarget: {product: atlas-a2, graph_mode: aclgraph}\ncandidates:\n"
           "  - module: model.layers.*.self_attn\n"
           "    phase: training\n    operator: npu_fusion_attention_v3\n")  # fmt: skip

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        mode = doc.target.graph_mode
        rec, path = ctx.operator_of(cand)
        if rec is None or mode not in ("aclgraph", "torchair"):
            return
        graph = rec.get("graph_mode") or {}
        if graph.get(mode) == "unsupported":
            notes = f" ({graph['notes']})" if graph.get("notes") else ""
            yield self.at(doc, path, f"{rec['name']} is not supported under {mode}{notes}; run it "
                          "outside the captured graph or pick another operator",
                          candidate=cand.index)  # fmt: skip


RULES = (ProductNotSupported(), TorchNpuTooOld(), ArgumentNotInRelease(), QuantizationNotSupported(),
         QuantizationMismatch(), PhaseNotSupported(), GraphModeNotSupported())  # fmt: skip
