"""KB203, KB204: does the candidate's quantization scheme fit the operator.

Part of the target-fit family (:mod:`kb.check.rules.target`): which of the record's
quantization modes can run in a model quantized as the candidate says (compared on the
roles the operator handles), on the target product, with the arguments and dtypes it
states.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from kb.check.conditions import same
from kb.lint.context import Context, Record
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document
from kb.lint.unit import CandidateRule
from kb.vocab import (
    normalize_scheme,
    product_support,
    quantized_roles,
    scheme_members,
    schemes_compatible,
    sub_series_in,
)

_GATE = (
    "candidates:\n  - module: model.layers.*.mlp.gate\n    operator: npu_moe_gating_top_k_softmax\n"
)


def _expression(mode: dict[str, Any]) -> str:
    return f"{mode['scheme']}+{mode['kv']}" if mode.get("kv") else str(mode.get("scheme"))


def quant_roles(rec: Record) -> set[str]:
    """What the operator's quantization modes decide: stated, else what its schemes quantize.

    An operator that reads quantized weights also reads activations (a weight-only
    matmul takes 16-bit ones), so weights bring activations along.
    """
    if rec.get("quant_roles") is not None:
        return set(rec["quant_roles"])
    roles: set[str] = set()
    for mode in rec.get("quantization") or []:
        roles |= quantized_roles(_expression(mode))
    if "weights" in roles:
        roles.add("activations")
    return roles


def _schemes(rec: Record, scheme: str) -> list[dict[str, Any]]:
    """The record's quantization modes that can run in a model quantized as ``scheme``.

    The modes named exactly as the scheme first, then (for a scheme that quantizes
    something) every other mode whose scheme
    agrees with it on the roles the operator handles
    (:func:`kb.vocab.schemes_compatible`): GMM's w8a8-dynamic modes serve a w8a8c8 model, and
    an attention core that only sees the KV cache runs any of its float8-KV modes in an
    mxfp8+kv-fp8 model, not just the one named mxfp8.
    """
    modes = rec.get("quantization") or []
    canon = normalize_scheme(scheme) or scheme
    roles = quant_roles(rec)
    exact = [m for m in modes if _expression(m) == canon]
    if exact and not quantized_roles(canon):
        return exact  # bf16 / fp16: the float dtype itself is what the candidate asks for
    return exact + [
        m
        for m in modes
        if m not in exact
        and schemes_compatible(canon, _expression(m), roles, partial=bool(m.get("partial")))
    ]


class _SchemeRule(CandidateRule):
    """A rule about the candidate's scheme that also judges a scheme family.

    ``w8a8`` names w8a8-static and w8a8-dynamic (:func:`kb.vocab.scheme_family`): what
    the rule finds for every member is reported as for one scheme; what it finds for
    some members only depends on the timing the list leaves open, so it is a warning
    naming every completion - the family word itself is never the error.
    """

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        scheme = cand.quantization
        if scheme is None:
            return
        members = scheme_members(scheme)
        if len(members) == 1:
            yield from self.judge(doc, ctx, cand, scheme)
            return
        told = {m: list(self.judge(doc, ctx, cand, m)) for m in members}
        failing = [m for m in members if told[m]]
        if not failing:
            return
        either = " or ".join(members)
        if len(failing) == len(members):
            neither = " nor ".join(members)
            for f in told[members[0]]:
                said = f.message.replace(members[0], scheme)
                yield replace(f, message=f"{said} (neither {neither} fits)")
            return
        fits = ", ".join(m for m in members if not told[m])
        for m in failing:
            first = told[m][0]
            yield replace(
                first,
                severity="warning",
                message=(
                    f"{scheme} is {either} and this depends on which: as {m}, "
                    f"{first.message}; as {fits} it fits. Write {either}"
                ),
            )

    def judge(self, doc: Document, ctx: Context, cand: Candidate, scheme: str) -> Iterator[Finding]:
        return iter(())


class QuantizationNotSupported(_SchemeRule):
    code = "KB203"
    name = "quantization-not-supported"
    severity = "error"
    summary = (
        "The candidate's quantization scheme is not one the operator offers (on this product)."
    )
    why = (
        "Quantization decides the dtypes of every weight and activation the operator reads; a "
        "scheme the kernel has no mode for cannot be reached by any argument setting. Only "
        "what the operator handles is compared: a gate or a norm runs unquantized inside a "
        "w8a8-dynamic model, an attention core sees only the KV-cache part of a scheme. Schemes are "
        "defined once (kb.vocab.SCHEMES); 'mxfp8+kv-fp8' adds a float8 KV cache to mxfp8."
    )
    fail = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: model.layers.*.mlp.down_proj\n"
        "    operator: npu_weight_quant_batchmatmul\n    quantization: w8a8-dynamic\n"
    )
    fix = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: model.layers.*.mlp.down_proj\n"
        "    operator: npu_weight_quant_batchmatmul\n    quantization: w8a16\n"
    )

    def judge(self, doc: Document, ctx: Context, cand: Candidate, scheme: str) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        if rec is None or not rec.get("quantization"):
            return
        modes = _schemes(rec, scheme)
        offered = sorted({_expression(m) for m in rec["quantization"]})
        if not modes:
            yield self.on(
                doc,
                cand,
                ("quantization",),
                f"{rec['name']} has no {scheme} mode (it offers {', '.join(offered)}); "
                f"pick one of those or another operator",
            )
            return
        product = doc.target.product
        if product is None:
            return
        fit = {product_support(product, m.get("products") or [product]) for m in modes}
        if "yes" in fit:
            return
        where = sorted({p for m in modes for p in m.get("products", [])})
        if "partial" in fit:  # a family target, the scheme documented on some sub-series
            subs = ", ".join(
                sorted({s for m in modes for s in sub_series_in(product, m.get("products") or [])})
            )
            yield replace(
                self.on(
                    doc,
                    cand,
                    ("quantization",),
                    f"{rec['name']} offers {scheme} only on {subs} of {product}; "
                    f"verify that your device is one of them",
                ),
                severity="warning",
            )
            return
        yield self.on(
            doc,
            cand,
            ("quantization",),
            f"{rec['name']} offers {scheme} only on {', '.join(where)}, not on "
            f"{product}; use another scheme on this product",
        )


class QuantizationMismatch(_SchemeRule):
    code = "KB204"
    name = "quantization-mismatch"
    severity = "error"
    summary = "Arguments or tensor dtypes contradict the quantization scheme the candidate names."
    why = (
        "A scheme is selected by argument values (weight_quant_mode=2, quant_mode=0 …) and "
        "implies tensor dtypes. A candidate saying w8a8-dynamic while passing bfloat16 weights, or "
        "the bf16 mode with a quantized setting, will not run the scheme it claims. The "
        "arguments you state pick the mode and the dtypes are held to that mode; an argument "
        "value no mode of the scheme uses is reported with the values that do and the scheme "
        "it selects instead."
    )
    fail = (
        "version: 1\ntarget: {product: atlas-a3}\n"
        + _GATE
        + "    quantization: bf16\n    tensors:\n      x: {dtype: float16}\n"
    )
    fix = (
        "version: 1\ntarget: {product: atlas-a3}\n"
        + _GATE
        + "    quantization: bf16\n    tensors:\n      x: {dtype: bfloat16}\n"
    )

    def judge(self, doc: Document, ctx: Context, cand: Candidate, scheme: str) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        if rec is None:
            return
        modes = _schemes(rec, scheme)
        if not modes:
            return  # KB203's business
        # The arguments pick the mode: when the stated ones select a mode of the scheme,
        # only its tensors are judged (weight_quant_mode=2 is w8a8-dynamic; a bfloat16
        # token_x there is a dtype problem, not a reason to suggest mode 1).
        selected = [m for m in modes if not list(self._arg_mismatches(cand, m, scheme))]
        if not selected:
            yield from self._wrong_selection(doc, cand, rec, modes, scheme)
            return
        best: list[tuple[tuple[Any, ...], str]] | None = None
        for mode in selected:
            problems = list(self._tensor_mismatches(cand, mode, scheme))
            if not problems:
                return
            if best is None or len(problems) < len(best):
                best = problems
        explained = self._explained(ctx, doc, cand, rec)
        for path, msg in best or []:
            if path not in explained:
                yield self.on(doc, cand, path, f"{rec['name']} {msg}")

    def _wrong_selection(
        self, doc: Document, cand: Candidate, rec: Record, modes: list[dict[str, Any]], scheme: str
    ) -> Iterator[Finding]:
        """No mode of the scheme has the stated arguments: name every value that selects it."""
        best = min(modes, key=lambda m: len(list(self._arg_mismatches(cand, m, scheme))))
        for path, _msg in self._arg_mismatches(cand, best, scheme):
            arg, have = path[1], cand.args.get(path[1])
            wanted = sorted(
                {str((m.get("select") or {})[arg]) for m in modes if arg in (m.get("select") or {})}
            )
            other = sorted(
                {
                    _expression(m)
                    for m in rec.get("quantization") or []
                    if arg in (m.get("select") or {}) and same(have, m["select"][arg])
                }
            )
            named = f" ({arg}={have} is {' or '.join(other)})" if other else ""
            yield self.on(
                doc,
                cand,
                path,
                f"{rec['name']} runs {scheme} with {arg}={' or '.join(wanted)}, not "
                f"{have}{named}; pass one of those or name the scheme you run",
            )

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
    def _arg_mismatches(
        cand: Candidate, mode: dict[str, Any], scheme: str
    ) -> Iterator[tuple[tuple[Any, ...], str]]:
        for arg, want in (mode.get("select") or {}).items():
            have = cand.args.get(arg)
            if have is not None and not isinstance(have, list) and not same(have, want):
                yield ("args", arg), f"selects {scheme} with {arg}={want}, not {have}"

    @staticmethod
    def _tensor_mismatches(
        cand: Candidate, mode: dict[str, Any], scheme: str
    ) -> Iterator[tuple[tuple[Any, ...], str]]:
        for name, dtypes in (mode.get("tensors") or {}).items():
            spec = cand.tensors.get(name)
            if spec is not None and spec.dtype is not None and spec.dtype not in dtypes:
                yield (
                    ("tensors", name, "dtype"),
                    f"in {scheme} takes {name} as {'/'.join(dtypes)}, not {spec.dtype}",
                )


#: The family title of this module's codes: quantization is part of the target fit.
FAMILY = "Target fit"

RULES = (
    QuantizationNotSupported(),
    QuantizationMismatch(),
)
