"""KB2xx: does the operator exist for the target product, torch_npu, quantization, phase, graph mode.

The quantization rules (KB203, KB204) are :mod:`kb.check.rules.quantization`.
"""

from __future__ import annotations

from collections.abc import Iterator

from kb.catalog.kernelfacts import kernel_products
from kb.check.values import version_before
from kb.lint.context import Context, Record
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document
from kb.lint.unit import CandidateRule
from kb.vocab import CAPTURED_GRAPH_MODES, product_support

_CAND = "candidates:\n  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v3\n"


class ProductNotSupported(CandidateRule):
    code = "KB201"
    name = "product-not-supported"
    severity = "error"
    kinds = ("fusion", "prefetch")
    summary = "Upstream says the operator is not supported on the target product."
    why = (
        "Fused kernels ship per chip generation; an operator whose product table marks a "
        "product x (or whose source refuses it) has no kernel there. The plan needs another "
        "operator or product. A product the table simply does not mention is KB208, a warning."
    )
    fail = (
        "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
        "  - module: model.layers.*.mlp.down_proj\n"
        "    operator: npu_dual_level_quant_matmul\n"
    )
    fix = (
        "version: 1\ntarget: {product: ascend-950}\ncandidates:\n"
        "  - module: model.layers.*.mlp.down_proj\n"
        "    operator: npu_dual_level_quant_matmul\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec, path = ctx.operator_of(cand)
        product = doc.target.product
        if rec is None or product is None:
            return
        supported, unsupported = rec.get("products") or [], rec.get("unsupported_products") or []
        if product_support(product, supported, unsupported) != "no":
            return
        where = f" (supported: {', '.join(supported)})" if supported else ""
        yield self.at(
            doc,
            path,
            f"{rec['name']} is documented as not supported on {product}"
            f"{where}; choose another operator or target product",
            candidate=cand.index,
        )


class ProductNotDocumented(CandidateRule):
    code = "KB208"
    name = "product-not-documented"
    severity = "warning"
    kinds = ("fusion", "prefetch")
    summary = "The operator's documentation does not list the target product (nor rules it out)."
    why = (
        "A product missing from an operator's page means 'not documented for it', not "
        "'unsupported': Huawei's own Atlas A3 ports call operators whose pages list only "
        "Atlas A2. Verify on the device; the message says where the operator is documented "
        "and whether shipping code calls it on your product. Where the operator's kernel is "
        "compiled for the target, KB209 speaks instead."
    )
    fail = (
        "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
        "  - module: model.layers.*.self_attn\n    phase: training\n"
        "    operator: npu_fusion_attention_v3\n"
    )
    fix = (
        "version: 1\ntarget: {product: atlas-a2-training}\ncandidates:\n"
        "  - module: model.layers.*.self_attn\n    phase: training\n"
        "    operator: npu_fusion_attention_v3\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec, path = ctx.operator_of(cand)
        product = doc.target.product
        if rec is None or product is None:
            return
        supported, unsupported = rec.get("products") or [], rec.get("unsupported_products") or []
        # "partial" (a family target, some of its sub-series documented) stays silent: a
        # page's product list is no restriction, and practice runs these across the family
        # (on vllm-ascend with --product atlas-a3 a warning here added 82 findings, 70 of
        # them npu_format_cast, whose page lists the A3 training series)
        if product_support(product, supported, unsupported) != "undocumented" or not supported:
            return
        if kernel_covers(rec, product):
            return  # KB209's business
        seen = _seen_on(rec, product)
        evidence = f"; shipping code calls it on {product} ({seen})" if seen else ""
        msg = (
            f"{rec['name']} is documented for {', '.join(supported)}, and its product "
            f"table does not mention {product}{evidence}; verify it on the device"
        )
        yield self.at(doc, path, msg, candidate=cand.index)


def kernel_covers(rec: Record, product: str) -> bool:
    """Whether the record's kernels are compiled for ``product`` (or for its family)."""
    return product_support(product, kernel_products(rec)) == "yes"


class ProductKernelOnly(CandidateRule):
    code = "KB209"
    name = "product-kernel-only"
    severity = "warning"
    kinds = ("fusion", "prefetch")
    summary = (
        "The page does not list the target product, but the operator's kernel is compiled for it."
    )
    why = (
        "The kernel registration the operator's wrapper reaches (ops-transformer / ops-nn "
        "op_host/*_def.cpp, harvested into the record's kernels) names the SoCs the kernel "
        "is built for. A product there and not on the page is kernel-only support: the "
        "code exists, but a compiled kernel is not a documented API, so limits and accuracy "
        "on that product are not promised. Verify on the device."
    )
    fail = (
        "version: 1\ntarget: {product: ascend-950}\ncandidates:\n"
        "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
    )
    fix = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: model.layers.*.input_layernorm\n    operator: npu_rms_norm\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec, path = ctx.operator_of(cand)
        product = doc.target.product
        if rec is None or product is None:
            return
        supported, unsupported = rec.get("products") or [], rec.get("unsupported_products") or []
        if product_support(product, supported, unsupported) != "undocumented":
            return  # documented, refused, or partly documented (silent, as in KB208)
        if not supported or not kernel_covers(rec, product):
            return
        k = (rec.get("kernels") or [{}])[0]
        where = f"{k.get('repo')}@{str(k.get('commit'))[:7]} {k.get('path')}:{k.get('lines')}"
        yield self.at(
            doc,
            path,
            f"{rec['name']}'s page lists {', '.join(supported)}, not "
            f"{product}; its kernel {k.get('op_type')} is compiled for {product} "
            f"({where}): kernel-only support, not a documented API; verify it on "
            f"the device",
            candidate=cand.index,
        )


def _seen_on(rec: Record, product: str) -> str:
    """``vllm-project/vllm-ascend: 3 sites`` for the call sites known to run on ``product``."""
    out = []
    for repo in rec.get("seen_in") or []:
        n = sum(
            1
            for site in repo.get("sites") or []
            if any(
                product_support(product, [p]) in ("yes", "partial")
                or product_support(p, [product]) == "yes"
                for p in site.get("products") or []
            )
        )
        if n:
            out.append(f"{repo.get('repo')}: {n} site{'s' if n != 1 else ''}")
    return ", ".join(out)


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
            fix = (
                f"use torch_npu {later} or a later release that has it"
                if later
                else "pick a release that has it ('kb show' lists them)"
            )
        yield self.at(doc, path, f"{msg}: {fix}", candidate=cand.index)


def _next_release(rec: Record, release: str) -> str | None:
    """The first release after ``release`` that the record lists as having the operator."""
    from kb.catalog.releases import release_key

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
                    yield self.on(
                        doc,
                        cand,
                        (section, name),
                        f"{name} is not in {rec['name']}'s signature in torch_npu "
                        f"{release}{hint}: drop it or upgrade",
                        key=True,
                    )


class PhaseNotSupported(CandidateRule):
    code = "KB205"
    name = "phase-not-supported"
    severity = "warning"
    summary = "Upstream restricts the operator to other phases than the candidate's."
    why = (
        "Some fused operators exist for some phases only (npu_chunk_gated_delta_rule and its "
        "recurrent sibling are inference-only, npu_incre_flash_attention is the decode kernel) and "
        "their shape limits assume "
        "it. A page that merely "
        "shows a decode example restricts nothing (real ports call npu_transpose_batchmatmul in "
        "prefill), so this fires only where upstream states a restriction (phase_limit)."
    )
    fail = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: model.layers.*.linear_attn\n    phase: training\n"
        "    operator: npu_chunk_gated_delta_rule\n"
    )
    fix = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: model.layers.*.linear_attn\n    phase: prefill\n"
        "    operator: npu_chunk_gated_delta_rule\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        rec = ctx.operator(cand.operator)
        wanted = cand.phases()
        limit = rec.get("phase_limit") if rec else None
        if rec is None or wanted is None or not limit:
            return
        missing = sorted(wanted - set(limit))
        if missing:
            yield self.on(
                doc,
                cand,
                ("phase",),
                f"{rec['name']} is restricted upstream to {', '.join(limit)}, not "
                f"{' or '.join(missing)}; split the candidate per phase or use the "
                f"{'/'.join(missing)} operator",
            )


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
    fail = (
        "version: 1\ntarget: {product: atlas-a2, graph_mode: aclgraph}\ncandidates:\n"
        "  - module: model.layers.*.self_attn\n"
        "    phase: training\n    operator: npu_fusion_attention\n"
    )
    fix = (
        "version: 1\ntarget: {product: atlas-a2, graph_mode: aclgraph}\ncandidates:\n"
        "  - module: model.layers.*.self_attn\n"
        "    phase: training\n    operator: npu_fusion_attention_v3\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        mode = cand.graph_mode_in(doc.target)
        rec, path = ctx.operator_of(cand)
        if rec is None or mode not in CAPTURED_GRAPH_MODES:
            return
        graph = rec.get("graph_mode") or {}
        if graph.get(mode) == "unsupported":
            notes = f" ({graph['notes']})" if graph.get("notes") else ""
            yield self.at(
                doc,
                path,
                f"{rec['name']} is not supported under {mode}{notes}; run it "
                "outside the captured graph or pick another operator",
                candidate=cand.index,
            )


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "Target fit"

RULES = (
    ProductNotSupported(),
    ProductNotDocumented(),
    ProductKernelOnly(),
    TorchNpuTooOld(),
    ArgumentNotInRelease(),
    PhaseNotSupported(),
    GraphModeNotSupported(),
)
