"""KB4xx: prefetch points (``kind: prefetch``), judged with the prefetch playbook record.

Which ops are weight-heavy targets and which make safe, output-only or unsafe
dependency windows, and the conservative starting fraction of the weight, all come
from the ``prefetch`` playbook record's ``op_classes`` and ``conservative_factor``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from kb.check.values import format_size
from kb.lint.context import Context, Record
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document, Path
from kb.lint.unit import CandidateRule, RuleUnit
from kb.vocab import CAPTURED_GRAPH_MODES, DTYPE_BYTES

_HEAD = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
_FIELDS = {
    "module": "model.layers.*.mlp",
    "phase": "decode",
    "target": "down_proj",
    "target_op": "matmul",
    "weight": "{shape: [18432, 7168], dtype: bfloat16}",
    "dependency": '{name: "gate_up_proj input", op: swiglu}',
    "max_size": "64MiB",
    "switch": "enable_prefetch",
    "switch_default": "false",
    "validated": "false",
}


def point(indent: str = "  ", **changes: str | None) -> str:
    """A prefetch candidate snippet: the sound default with ``changes`` (None drops a field)."""
    fields = dict(_FIELDS, **changes)
    lines = [f"{indent}- kind: prefetch"]
    lines += [f"{indent}  {k}: {v}" for k, v in fields.items() if v is not None]
    return "\n".join(lines) + "\n"


def weight_bytes(cand: Candidate) -> int | None:
    """prod(shape) × dtype bytes, when the candidate states both in numbers."""
    w = cand.weight
    if w is None or w.dtype is None or not w.shape:
        return None
    if not all(isinstance(d, int) and d > 0 for d in w.shape):
        return None
    per = DTYPE_BYTES.get(w.dtype)
    if per is None:
        return None
    return math.ceil(math.prod(w.shape) * per)


def _target_class(ctx: Context, cand: Candidate) -> tuple[Record | None, Path, str]:
    if cand.target_op:
        return ctx.op_class(cand.target_op), ("target_op",), cand.target_op
    return ctx.op_class(cand.target), ("target",), cand.target or ""


#: Window kinds from the most to the least cautious: where a spelling names several op
#: classes, the window is judged by the most cautious of them.
_CAUTION = ("unsafe", "output-only", "safe")


def _words(text: str) -> str:
    """``_tp_all_reduce_`` for "tp all-reduce": lower case, every separator one underscore."""
    return "_" + re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") + "_"


def _class_in_words(ctx: Context, text: str | None) -> Record | None:
    """The op class a free spelling names by one of the playbook's names as whole words.

    A window is written as the port writes it: ``tensor_model_parallel_all_reduce``,
    ``dist.all_reduce``, ``"tp all-reduce"``, ``npu_mm_all_reduce_base``.  Underscores,
    dots, dashes and spaces separate words; several classes found: the most cautious.
    """
    if not text:
        return None
    padded = _words(text)
    found = [
        cls
        for cls in (ctx.playbook() or {}).get("op_classes", [])
        if any(_words(n) in padded for n in cls.get("names", []))
    ]
    ranked = [c for c in found if c.get("window") in _CAUTION]
    return min(ranked, key=lambda c: _CAUTION.index(c["window"]), default=None)


def _window_class(ctx: Context, cand: Candidate) -> tuple[Record | None, Path, str]:
    """The playbook class of the dependency window: its op (exact spelling, then the words
    of it), else its name the same way."""
    dep = cand.dependency
    if dep is None:
        return None, (), ""
    for field, text in (("op", dep.op), ("name", dep.name)):
        cls = (ctx.op_class(text) or _class_in_words(ctx, text)) if text else None
        if cls is not None:
            return cls, ("dependency", field), text or ""
    return None, (), ""


class PrefetchRule(CandidateRule):
    fronts = ("check",)
    kinds = ("prefetch",)


class TargetNotWeightHeavy(PrefetchRule):
    code = "KB401"
    name = "prefetch-target-not-weight-heavy"
    severity = "error"
    summary = "The prefetch target is not a weight-heavy op (norm, RoPE, activation, routing …)."
    why = (
        "Prefetching only pays for a memory-bound consumer of a weight: a matmul (the router "
        "classifier included), quantized matmul, grouped matmul or MLA prolog. Norms, RoPE "
        "and activations read little weight; they are windows, not targets. The playbook's "
        "op classes decide."
    )
    fail = _HEAD + point(target="input_layernorm", target_op="rms_norm")
    fix = _HEAD + point()

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        cls, path, op = _target_class(ctx, cand)
        if cls is None or cls.get("weight_heavy"):
            return
        yield self.on(
            doc,
            cand,
            path,
            f"{op} is in the playbook's {cls['id']} class, not a weight-heavy target "
            f"({cls.get('why', '').rstrip('.')}); prefetch for the matmul that reads "
            "the large weight instead",
        )


class UnsafeWindow(PrefetchRule):
    code = "KB402"
    name = "prefetch-unsafe-window"
    severity = "error"
    summary = "The dependency window is a large data move, which competes for bandwidth."
    why = (
        "A prefetch issued next to a large transpose, concat or copy shares HBM bandwidth "
        "with it: both slow down and the gain disappears. Communication is different only in "
        "that its finished output is a legal trigger (KB403 asks for it). If no safe window "
        "exists in the phase, the honest answer is no prefetch there."
    )
    fail = _HEAD + point(dependency='{name: "kv concat", op: concat}')
    fix = _HEAD + point()

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        cls, path, op = _window_class(ctx, cand)
        if cls is None or cls.get("window") != "unsafe":
            return
        yield self.on(
            doc,
            cand,
            path,
            f"{op} ({cls['id']}) is not a safe window: {cls.get('why', '').rstrip('.')}; "
            "trigger from an earlier compute-bound op (norm, RoPE, activation, routing) "
            "or drop this point",
        )


_OUTPUT_WORDS = re.compile(r"(?i)(\boutputs?\b|\bout\b|_out\b|输出)")
_INPUT_WORDS = re.compile(r"(?i)(\binputs?\b|输入)")


class OutputOnlyWindow(PrefetchRule):
    code = "KB403"
    name = "prefetch-output-only-window"
    severity = "warning"
    summary = "An output-only window (large matmul, attention core, communication) is used without saying the trigger is its output."
    why = (
        "A large matmul, an attention core or a collective is itself bandwidth-bound while it "
        "runs; only after it finishes is bandwidth free. Its output is a good trigger, its "
        "input is not. Say so with dependency.output: true (or a name such as 'o_proj output'). "
        "Ports trigger on a finished all-reduce (vLLM-Ascend's MLP prefetch starts from the "
        "reduced o_proj output). The step is read from dependency.op, else dependency.name, "
        "by the playbook's op names as whole words: tensor_model_parallel_all_reduce, "
        "'tp all-reduce' and hcom_allReduce_ are communication."
    )
    fail = _HEAD + point(
        target="gate_up_proj",
        weight="{shape: [7168, 36864], dtype: bfloat16}",
        dependency="{name: o_proj, op: matmul}",
    )
    fix = _HEAD + point(
        target="gate_up_proj",
        weight="{shape: [7168, 36864], dtype: bfloat16}",
        dependency="{name: o_proj, op: matmul, output: true}",
    )

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        cls, path, op = _window_class(ctx, cand)
        dep = cand.dependency
        if cls is None or dep is None or cls.get("window") != "output-only":
            return
        name = dep.name or ""
        said_output = dep.output is True or (
            dep.output is None
            and bool(_OUTPUT_WORDS.search(name))
            and not _INPUT_WORDS.search(name)
        )
        if said_output:
            return
        how = (
            "says it is the input"
            if dep.output is False or _INPUT_WORDS.search(name)
            else "does not say it is the output"
        )
        yield self.on(
            doc,
            cand,
            ("dependency",) if path == () else path,
            f"{op} ({cls['id']}) is a window only once it has finished, and this "
            f"dependency {how}: trigger on its output (dependency.output: true) or "
            "pick a compute-bound window",
        )


class MaxSizeNotPositive(PrefetchRule):
    code = "KB404"
    name = "prefetch-max-size-not-positive"
    severity = "error"
    summary = "max_size is zero or negative."
    why = "npu_prefetch rejects a max_size that is not greater than zero; size it from the weight."
    fail = _HEAD + point(max_size="0")
    fix = _HEAD + point()

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        if cand.max_size is not None and cand.max_size <= 0:
            total = weight_bytes(cand)
            factor = ctx.conservative_factor()
            start = (
                f"; start at {factor:g} x the weight: {format_size(total * factor)}"
                if total and factor
                else ""
            )
            yield self.on(doc, cand, ("max_size",), f"max_size must be greater than 0{start}")


class MaxSizeAboveWeight(PrefetchRule):
    code = "KB405"
    name = "prefetch-max-size-above-weight"
    severity = "warning"
    summary = "max_size is larger than the weight it prefetches."
    why = (
        "npu_prefetch clamps to the tensor's size, so the excess does nothing, but a size "
        "above the weight usually means a wrong shape or dtype in the computation "
        "(bytes = prod(shape) × dtype bytes) and the tuning ladder is off."
    )
    fail = _HEAD + point(max_size="300MiB", validated="true")
    fix = _HEAD + point(max_size="252MiB", validated="true")

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        total = weight_bytes(cand)
        if cand.max_size is None or total is None or cand.max_size <= total:
            return
        assert cand.weight is not None
        yield self.on(
            doc,
            cand,
            ("max_size",),
            f"max_size is above the size of the weight ({format_size(cand.max_size)} > "
            f"{format_size(total)} for {' x '.join(map(str, cand.weight.shape or []))} "
            f"{cand.weight.dtype}); npu_prefetch clamps it, so recompute it from the "
            "weight's shape and dtype",
        )


class MaxSizeAboveConservative(PrefetchRule):
    code = "KB406"
    name = "prefetch-max-size-above-conservative"
    severity = "warning"
    summary = "max_size exceeds the playbook's conservative fraction of the weight before the point is validated."
    why = (
        "Prefetching too much thrashes L2 and slows the ops around the window. The playbook "
        "starts at its conservative_factor (half the weight) and climbs the ladder only after "
        "profiling confirmed the point (validated: true)."
    )
    fail = _HEAD + point(max_size="200MiB")
    fix = _HEAD + point(max_size="126MiB")

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        total, factor = weight_bytes(cand), ctx.conservative_factor()
        if cand.validated is True or cand.max_size is None or not total or not factor:
            return
        limit = total * factor
        if limit < cand.max_size <= total:
            share = (
                f"the whole weight, {format_size(total)}"
                if cand.max_size == total
                else f"{format_size(cand.max_size)} of {format_size(total)}"
            )
            yield self.on(
                doc,
                cand,
                ("max_size",),
                f"max_size is more than {factor:g} x the weight before the point is "
                f"validated ({share}); "
                f"start at {format_size(limit)} and raise it after profiling "
                "confirms the point (validated: true)",
            )


class MissingSwitch(PrefetchRule):
    code = "KB407"
    name = "prefetch-missing-switch"
    severity = "error"
    summary = "The prefetch point names no config switch guarding it."
    why = (
        "Prefetch gains depend on model, batch and parallel layout; every point must be "
        "switchable off without a code change, so a regression can be ruled out in one run."
    )
    fail = _HEAD + point(switch=None, switch_default=None)
    fix = _HEAD + point()

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        if cand.switch:
            return
        if "switch" in cand.stated:
            yield self.on(
                doc,
                cand,
                ("switch",),
                "switch is empty; name the config flag that "
                "guards this prefetch (e.g. enable_prefetch)",
            )
        else:
            yield self.on(
                doc,
                cand,
                (),
                "no switch: guard the prefetch with a config flag "
                "(switch: enable_prefetch, switch_default: false)",
            )


class SwitchDefaultsOn(PrefetchRule):
    code = "KB408"
    name = "prefetch-switch-defaults-on"
    severity = "error"
    summary = "The switch guarding the prefetch is on by default."
    why = (
        "A prefetch that is on by default changes performance for every user of the model "
        "before it was profiled on their setup; ship it off and turn it on per deployment."
    )
    fail = _HEAD + point(switch_default="true")
    fix = _HEAD + point()

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        if cand.switch_default is True:
            yield self.on(
                doc,
                cand,
                ("switch_default",),
                f"{cand.switch or 'the switch'} defaults to on; make it default to false",
            )


class GraphModeWithoutDependency(PrefetchRule):
    code = "KB409"
    name = "prefetch-graph-mode-without-dependency"
    severity = "error"
    summary = "In graph mode (aclgraph, torchair) the prefetch has no dependency tensor."
    why = (
        "In a captured graph the only ordering is data dependence: without a dependency "
        "tensor the prefetch may be scheduled anywhere, or dropped. It must depend on a "
        "tensor produced right before the window, on the target's logical path."
    )
    fail = "version: 1\ntarget: {product: atlas-a3, graph_mode: torchair}\ncandidates:\n" + point(
        dependency=None
    )
    fix = "version: 1\ntarget: {product: atlas-a3, graph_mode: torchair}\ncandidates:\n" + point()

    def check_candidate(self, doc: Document, ctx: Context, cand: Candidate) -> Iterator[Finding]:
        mode = doc.target.graph_mode
        if mode not in CAPTURED_GRAPH_MODES:
            return
        dep = cand.dependency
        if dep is not None and (dep.name or dep.op):
            return
        path: Path = ("dependency",) if "dependency" in cand.stated else ()
        yield self.on(
            doc,
            cand,
            path,
            f"the target runs under {mode}, where a prefetch needs a dependency tensor "
            "produced right before the window: add dependency: {name: …, op: …}",
        )


class SeveralUnvalidated(RuleUnit):
    code = "KB410"
    name = "prefetch-several-unvalidated"
    severity = "warning"
    summary = "More than one unvalidated prefetch point in the same module."
    why = (
        "Several new prefetch points at once make the profile unreadable: a gain in one and a "
        "loss in another cancel out. Prove one point (validated: true), then add the next."
    )
    fail = (
        _HEAD
        + point()
        + point(
            target="gate_up_proj",
            weight="{shape: [7168, 36864], dtype: bfloat16}",
            dependency='{name: "o_proj output", op: matmul, output: true}',
        )
    )
    fix = (
        _HEAD
        + point(validated="true")
        + point(
            target="gate_up_proj",
            weight="{shape: [7168, 36864], dtype: bfloat16}",
            dependency='{name: "o_proj output", op: matmul, output: true}',
        )
    )

    def check(self, doc: Document, ctx: Context) -> Iterator[Finding]:
        first: dict[str, Candidate] = {}
        for cand in doc.candidates:
            if cand.kind != "prefetch" or cand.module is None or cand.validated is True:
                continue
            if cand.module not in first:
                first[cand.module] = cand
                continue
            line = doc.where(first[cand.module].path)[0]
            path: tuple[Any, ...] = ("target",) if cand.target else ()
            yield self.at(
                doc,
                cand.path + path,
                f"second unvalidated prefetch point in {cand.module} (the first is on "
                f"line {line}); validate one point with profiling before adding more",
                candidate=cand.index,
            )


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "Prefetch points"

RULES = (
    TargetNotWeightHeavy(),
    UnsafeWindow(),
    OutputOnlyWindow(),
    MaxSizeNotPositive(),
    MaxSizeAboveWeight(),
    MaxSizeAboveConservative(),
    MissingSwitch(),
    SwitchDefaultsOn(),
    GraphModeWithoutDependency(),
    SeveralUnvalidated(),
)
