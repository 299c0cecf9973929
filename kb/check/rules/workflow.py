"""KB3xx: the fusion workflow's bookkeeping — status, evidence, chains, duplicates, cache layout."""

from __future__ import annotations

from collections.abc import Iterator

from kb.check.conditions import same
from kb.lint.context import Context, Record
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document, Path, phases_overlap
from kb.lint.unit import CandidateRule, RuleUnit
from kb.vocab import CALL_PREFIXES, INFERENCE_PHASES, normalize
from kb.vocab.parallel import DEFAULT_PARALLEL, PARALLEL_MODES

_HEAD = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
_ATTN = "  - module: model.layers.*.self_attn\n    phase: decode\n    operator: npu_mla_prolog_v3\n"


def _suggest(name: str, choices: list[str]) -> str:
    from kb.core.fuzzy import suggest

    hits = suggest(name, choices, limit=3)
    return f" (did you mean {', '.join(hits)}?)" if hits else ""


def target_facts(doc: Document, cand: Candidate) -> dict[str, str]:
    """The selector's situation facts of a candidate: the list's target (product,
    torch_npu release, scheme, graph mode, parallel sizes) and the candidate's phase."""
    t = doc.target
    sizes = t.parallel or {}
    # the mode farthest from one device whose size is above 1 (expert before tensor)
    parallel = next(
        (m for m in reversed(PARALLEL_MODES) if m != DEFAULT_PARALLEL and (sizes.get(m) or 1) > 1),
        None,
    )
    mode = t.graph_modes.get(cand.phase or "") or t.graph_mode
    facts = {
        "product": t.product,
        "release": t.torch_npu,
        "quant": cand.quantization or t.quantization,
        "mode": mode,
        "parallel": parallel,
        "phase": cand.phase if cand.phase in INFERENCE_PHASES else None,
    }
    return {k: v for k, v in facts.items() if v}


#: (catalog content, facts) -> the names of the fitting chains, best first.
_FITTING: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, ...]] = {}


def chains_staging(ctx: Context, doc: Document, cand: Candidate, operator: str) -> list[str]:
    """Chains that stage ``operator`` and fit the candidate's target, best first - chosen
    by the one selector (:func:`kb.catalog.select.select`) ``kb advise`` and the planner use."""
    from kb.catalog.select import select

    facts = tuple(sorted(target_facts(doc, cand).items()))
    key = ("chains-staging", operator, facts)
    if key not in ctx.memo:
        # the fitting chains depend only on the records and the facts: kept per catalog
        # content for the process (a site build checks many rule examples on one catalog)
        shared = (str(getattr(ctx.catalog, "content", "")), facts)
        names = _FITTING.get(shared) if shared[0] else None
        if names is None:
            names = tuple(f.chain for f in select(ctx.catalog, dict(facts)).fitting)
            if shared[0]:
                if len(_FITTING) >= 64:
                    _FITTING.clear()
                _FITTING[shared] = names
        ctx.memo[key] = [
            chain
            for chain in names
            if any(
                (ctx.operator(st.get("operator")) or {}).get("name") == operator
                for st in (ctx.chain(chain) or {}).get("stages") or []
            )
        ]
    out: list[str] = ctx.memo[key]
    return out


def _fitting_hint(ctx: Context, doc: Document, cand: Candidate, operator: str | None) -> str:
    if not operator:
        return ""
    names = [c for c in chains_staging(ctx, doc, cand, operator) if c != cand.chain][:3]
    return f"; chains that stage {operator} and fit the target: {', '.join(names)}" if names else ""


class WorkflowRule(CandidateRule):
    """Rules about the plan itself (status, evidence, chains): candidate lists only."""

    fronts = ("check",)


class NotApplicableWithoutEvidence(WorkflowRule):
    code = "KB301"
    name = "not-applicable-without-evidence"
    severity = "error"
    skip_not_applicable = False
    summary = "A candidate marked not-applicable does not say why (evidence)."
    why = (
        "'Does not fit' is only useful with the hard constraint behind it (an error message, "
        "a documented limit). Without evidence the next reader cannot tell a real blocker "
        "from a change that merely looked large, and the module is never revisited."
    )
    fail = _HEAD + _ATTN + "    status: not-applicable\n"
    fix = (
        _HEAD + _ATTN + "    status: not-applicable\n"
        '    evidence: "head_dim 256 is outside the operator\'s D limit {128, 192}"\n'
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        if cand.status == "not-applicable" and not (cand.evidence or "").strip():
            yield self.on(
                doc,
                cand,
                ("status",),
                "status not-applicable needs 'evidence': the hard constraint that rules "
                "the operator out (error text, documented limit, profiling result)",
            )


class PrerequisiteMissing(WorkflowRule):
    code = "KB302"
    name = "needs-prerequisite-without-prerequisites"
    severity = "error"
    summary = "A candidate marked needs-prerequisite does not list its prerequisites."
    why = (
        "needs-prerequisite means the operator fits once something else changes (RoPE "
        "precompute, a paged KV cache, NZ weights). Those changes are the work items; a "
        "status without them cannot be planned."
    )
    fail = _HEAD + _ATTN + "    status: needs-prerequisite\n"
    fix = (
        _HEAD
        + _ATTN
        + "    status: needs-prerequisite\n    prerequisites: [rope-precompute, paged-kv-cache]\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        if cand.status != "needs-prerequisite" or cand.prerequisites:
            return
        known = ""
        chain = ctx.chain(cand.chain)
        if chain and chain.get("prerequisites"):
            ids = ", ".join(p["id"] for p in chain["prerequisites"])
            known = f" (chain {chain['name']} lists: {ids})"
        yield self.on(
            doc,
            cand,
            ("status",),
            f"status needs-prerequisite needs 'prerequisites', e.g. [rope-precompute]{known}",
        )


class UnknownChain(WorkflowRule):
    code = "KB303"
    name = "unknown-chain"
    severity = "error"
    skip_not_applicable = False
    summary = "The candidate names a reference chain that does not exist."
    why = (
        "The chain ties a candidate to a proven operator sequence (its stages, prerequisites "
        "and prefill/decode differences). A wrong name loses that link; 'kb list' shows chains."
    )
    fail = _HEAD + _ATTN + "    chain: mla-absorb-decoding\n"
    fix = _HEAD + _ATTN

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        if not cand.chain or ctx.chain(cand.chain) is not None:
            return
        rec = ctx.record(cand.chain)
        if rec is not None:
            msg = f"{cand.chain!r} is a {rec.get('kind')}, not a chain"
        else:
            msg = f"unknown chain {cand.chain!r}{_suggest(cand.chain, ctx.names('chain'))}"
        op = ctx.operator(cand.operator)
        msg += _fitting_hint(ctx, doc, cand, op["name"] if op else None)
        yield self.on(doc, cand, ("chain",), msg + "; see 'kb search' for reference chains")


def _stage_ops(ctx: Context, chain: Record) -> list[tuple[str, str]]:
    """(operator record name, stage phase) of every non-torch stage."""
    out = []
    for stage in chain.get("stages") or []:
        op = stage.get("operator")
        if not op or op == "plain-torch":
            continue
        rec = ctx.operator(op)
        out.append((rec["name"] if rec else op, stage.get("phase") or "both"))
    return out


class OperatorOutsideChain(WorkflowRule):
    code = "KB304"
    name = "operator-outside-chain"
    severity = "error"
    summary = "The candidate's operator is not a stage of the chain it names (for its phase)."
    why = (
        "A chain is a sequence proven to work together; an operator from outside it (or from "
        "the other phase's stages) means the candidate follows a different path than it claims."
    )
    fail = (
        _HEAD
        + _ATTN.replace("npu_mla_prolog_v3", "npu_sparse_flash_attention")
        + "    chain: mla-absorb-decode\n"
    )
    fix = _HEAD + _ATTN + "    chain: mla-absorb-decode\n"

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        chain = ctx.chain(cand.chain)
        rec = ctx.operator(cand.operator)
        if chain is None or rec is None:
            return
        stages = _stage_ops(ctx, chain)
        if not stages:
            return
        phases = [p for op, p in stages if op == rec["name"]]
        if not phases:
            listed = ", ".join(dict.fromkeys(op for op, _ in stages))
            yield self.on(
                doc,
                cand,
                ("operator",),
                f"{rec['name']} is not a stage of chain {chain['name']} (its operators: "
                f"{listed}); fix the chain or the operator"
                + _fitting_hint(ctx, doc, cand, rec["name"]),
            )
            return
        wanted = cand.phases()
        if wanted is None or "both" in phases:
            return
        if not wanted & set(phases):
            yield self.on(
                doc,
                cand,
                ("phase",),
                f"in chain {chain['name']} {rec['name']} is a {'/'.join(phases)} stage, "
                f"not {cand.phase}",
            )


class ChainStageArguments(WorkflowRule):
    code = "KB307"
    name = "chain-stage-arguments"
    severity = "warning"
    summary = "An argument differs from the value the named chain uses for that stage."
    why = (
        "A reference chain records the argument values it was proven with (a layout, a "
        "sparse mode, a cache mode). Deviating can be right, but often it is the reason the "
        "chain's output goes wrong; 'kb show CHAIN' explains each stage."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_fused_infer_attention_score_v2\n    chain: mla-absorb-decode\n"
        "    args: {sparse_mode: 3}\n    tensors:\n      atten_mask: {dtype: int8}\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_fused_infer_attention_score_v2\n    chain: mla-absorb-decode\n"
        "    args: {sparse_mode: 0}\n"
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        chain = ctx.chain(cand.chain)
        rec = ctx.operator(cand.operator)
        if chain is None or rec is None or not cand.args:
            return
        wanted = cand.phases()
        stages = []
        for stage in chain.get("stages") or []:
            if (
                ctx.operator(stage.get("operator")) is not rec
                and stage.get("operator") != rec["name"]
            ):
                continue
            phase = stage.get("phase") or "both"
            if wanted is None or phase == "both" or phase in wanted:
                stages.append(stage)
        # a dtype argument is read canonically from the candidate (torch.int32 -> int32);
        # the chain's spelling of it is read the same way before comparing
        dtype_args = {p["name"] for p in rec.get("parameters") or [] if p.get("takes") == "dtype"}
        best: list[tuple[str, object, object]] | None = None
        for stage in stages:
            diffs = [
                (arg, want, cand.args[arg])
                for arg, want in (stage.get("args") or {}).items()
                if cand.args.get(arg) is not None
                and not _same_value(
                    cand.args[arg],
                    (normalize("dtype", want) or want) if arg in dtype_args else want,
                )
            ]
            if not diffs:
                return
            if best is None or len(diffs) < len(best):
                best = diffs
        for arg, want, have in best or []:
            yield self.on(
                doc,
                cand,
                ("args", arg),
                f"chain {chain['name']} runs {rec['name']} with {arg}={want}, not "
                f"{have}; keep the chain's value or say why in notes "
                f"('kb show {chain['name']}' explains the stage)",
            )


def _same_value(a: object, b: object) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return same(a, b)


def _key(ctx: Context, cand: Candidate) -> tuple[str, str, str] | None:
    if cand.module is None:
        return None
    if cand.kind == "prefetch":
        return ("prefetch", cand.module, (cand.target or "").lower()) if cand.target else None
    if not cand.operator:
        return None
    rec = ctx.operator(cand.operator)
    return ("fusion", cand.module, rec["name"] if rec else _bare(cand.operator))


def _bare(op: str) -> str:
    """An unresolved operator spelling without its call prefix, for comparing."""
    name = op.strip().lower()
    for prefix in CALL_PREFIXES:
        name = name.removeprefix(prefix)
    return name


class DuplicateCandidate(RuleUnit):
    code = "KB305"
    name = "duplicate-candidate"
    severity = "warning"
    summary = "Two candidates name the same module, phase and operator (or prefetch target)."
    why = (
        "A duplicate usually means two analyses were merged and one is stale: they may "
        "disagree on arguments or status, and the plan no longer says which one holds."
    )
    fail = _HEAD + _ATTN + _ATTN
    fix = _HEAD + _ATTN + _ATTN.replace("decode", "prefill")

    def check(self, doc: Document, ctx: Context) -> Iterator[Finding]:
        groups: dict[tuple[str, str, str], list[Candidate]] = {}
        for cand in doc.candidates:
            key = _key(ctx, cand)
            if key is None:
                continue
            for earlier in groups.get(key, []):
                if phases_overlap(earlier, cand):
                    line = doc.where(earlier.path)[0]
                    what = "target" if cand.kind == "prefetch" else "operator"
                    yield self.at(
                        doc,
                        cand.path + (what,),
                        f"same module, phase and {what} as the candidate on line {line}; "
                        "merge them or give each its own phase",
                        candidate=cand.index,
                    )
                    break
            groups.setdefault(key, []).append(cand)


#: How a candidate reveals its KV-cache organisation.  Values of these arguments name a
#: layout; the paged ones start with "PA" (PA_BSND, PA_NZ, PA_BLK_NZ …).
LAYOUT_ARGS = ("cache_mode", "layout_kv", "kv_layout", "cache_layout")
PAGING_INPUTS = ("block_table", "block_tables", "slot_mapping")
_ATTENTION_STEPS = {"attention", "flash_attention", "paged_attention", "sparse_attention"}


def _role(rec: Record) -> str | None:
    fuses = set(rec.get("fuses") or [])
    if "kv_cache_write" in fuses or rec.get("category") == "kv-cache":
        return "writer"
    if fuses & _ATTENTION_STEPS or rec.get("category") == "attention":
        return "attention"
    return None


def cache_layout(cand: Candidate, rec: Record) -> tuple[str, Path, str] | None:
    """("paged" | "contiguous", where it is stated, how) — None when the candidate does not say.

    An operator whose record fixes the organisation (``cache_layout``) is that, whatever
    its mode strings say: npu_scatter_pa_kv_cache's "Norm" is an ND block pool, not a
    contiguous cache.
    """
    fixed = rec.get("cache_layout")
    if fixed:
        return str(fixed), ("operator",), f"{rec['name']} always uses a {fixed} cache"
    for arg in LAYOUT_ARGS:
        value = cand.args.get(arg)
        if isinstance(value, str) and value:
            paged = value.upper().startswith("PA")
            return ("paged" if paged else "contiguous"), ("args", arg), f"{arg} {value}"
    for name in PAGING_INPUTS:
        if name in cand.tensors or name in cand.args:
            given = cand.tensors.get(name) if name in cand.tensors else cand.args.get(name)
            section = "tensors" if name in cand.tensors else "args"
            if given is not None:
                return "paged", (section, name), f"{name} given"
            return "contiguous", (section, name), f"{name}: null"
    size = cand.args.get("block_size")
    if isinstance(size, int) and not isinstance(size, bool):
        return ("paged" if size > 0 else "contiguous"), ("args", "block_size"), f"block_size {size}"
    name = rec["name"]
    if "_pa_" in name or name.endswith("_pa"):
        return "paged", ("operator",), f"{name} writes paged blocks"
    return None


def _related_modules(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


class CacheLayoutMismatch(RuleUnit):
    code = "KB306"
    name = "cache-layout-mismatch"
    severity = "error"
    summary = "A KV-cache writer and an attention core in one module and phase disagree on paged vs contiguous cache."
    why = (
        "The cache writer and the attention core must agree on how the cache is organised: a "
        "paged writer (slot ids into blocks) feeding an attention core that reads a contiguous "
        "cache (no block_table) reads garbage, and the opposite fails on shapes."
    )
    fail = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_mla_prolog_v3\n    args: {cache_mode: PA_BSND}\n"
        "    tensors:\n      cache_index: {dtype: int64}\n"
        "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_fused_infer_attention_score_v2\n    tensors:\n      block_table: null\n"
    )
    fix = (
        _HEAD + "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_mla_prolog_v3\n    args: {cache_mode: PA_BSND}\n"
        "    tensors:\n      cache_index: {dtype: int64}\n"
        "  - module: model.layers.*.self_attn\n    phase: decode\n"
        "    operator: npu_fused_infer_attention_score_v2\n"
        "    args: {block_size: 128, actual_seq_kvlen: [512]}\n"
        "    tensors:\n      block_table: {dtype: int32}\n"
    )

    def check(self, doc: Document, ctx: Context) -> Iterator[Finding]:
        writers: list[tuple[Candidate, Record, tuple[str, Path, str]]] = []
        cores: list[tuple[Candidate, Record, tuple[str, Path, str]]] = []
        for cand in doc.candidates:
            if cand.kind != "fusion" or cand.status == "not-applicable" or cand.module is None:
                continue
            rec = ctx.operator(cand.operator)
            role = _role(rec) if rec else None
            layout = cache_layout(cand, rec) if rec and role else None
            if layout is None or rec is None:
                continue
            (writers if role == "writer" else cores).append((cand, rec, layout))
        for core, core_rec, (c_layout, c_path, c_how) in cores:
            for writer, w_rec, (w_layout, _w_path, w_how) in writers:
                if w_layout == c_layout or not phases_overlap(writer, core):
                    continue
                if not _related_modules(writer.module or "", core.module or ""):
                    continue
                line = doc.where(writer.path)[0]
                fix = (
                    "pass block_table (and block_size) so it reads the paged blocks"
                    if w_layout == "paged"
                    else "configure it for the contiguous cache"
                )
                yield self.at(
                    doc,
                    core.path + c_path,
                    f"{core_rec['name']} reads a {c_layout} cache ({c_how}) but "
                    f"{w_rec['name']} on line {line} writes a {w_layout} one ({w_how}): "
                    f"{fix}, or change the writer",
                    candidate=core.index,
                )
                break


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "Workflow bookkeeping"

RULES = (
    NotApplicableWithoutEvidence(),
    PrerequisiteMissing(),
    UnknownChain(),
    OperatorOutsideChain(),
    DuplicateCandidate(),
    CacheLayoutMismatch(),
    ChainStageArguments(),
)
