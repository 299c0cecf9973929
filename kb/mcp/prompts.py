"""Workflow prompts: the fusion and the prefetch workflow as steps an agent can follow.

The steps are our own wording of the two workflows the knowledge base serves; the
facts inside them (which decision trees exist and what they ask, which ops are prefetch
targets or safe windows, the conservative factor and the tuning ladder, what success
and failure look like) are read from the records at the time of the call, so the
prompts never disagree with the tools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from kb.mcp.calls import catalog as current_catalog

Record = dict[str, Any]


def _target(model: str, product: str, torch_npu: str, extra: str = "") -> str:
    facts = [
        f"model: {model}" if model else "",
        f"product: {product}" if product else "",
        f"torch_npu: {torch_npu}" if torch_npu else "",
        extra,
    ]
    known = "; ".join(f for f in facts if f)
    return f"What is known so far: {known}." if known else "Nothing about the target is known yet."


def _trees(catalog: Any) -> str:
    from kb.api.tree import tree

    lines = []
    for t in tree(catalog)["trees"]:
        asks = ", ".join(f"{k} ({'/'.join(v)})" for k, v in t["flags"].items())
        lines.append(f"  - {t['name']}: {t['summary']} Asks: {asks}.")
    return "\n".join(lines)


def fusion(
    model: Annotated[str, Field(description="the model or module being ported")] = "",
    product: Annotated[str, Field(description="target product, e.g. atlas-a3")] = "",
    torch_npu: Annotated[str, Field(description="torch_npu release in use")] = "",
    quantization: Annotated[
        str, Field(description="bf16, w8a8-static, w8a8-dynamic, w8a8c8, w4a16 ...")
    ] = "",
) -> str:
    """Replace a model's modules with torch_npu fused operators, module by module: decompose,
    match reference chains through the decision trees, confirm each operator's constraints,
    write a candidate list and check it, then replace and verify one module at a time."""
    catalog = current_catalog()
    extra = f"quantization: {quantization}" if quantization else ""
    return f"""\
You are porting inference code to Ascend NPUs and want torch_npu fused operators where
they fit. Work through these steps with the torch_npu knowledge-base tools. Never guess
an operator's arguments, dtypes, formats or products: read them with `show`.
{_target(model, product, torch_npu, extra)}

1. Decompose the model. List its modules down to the level an operator could replace:
   attention (norm, q/k/v projection, RoPE, KV-cache write and read, attention core,
   output projection; for MLA also the absorbed projections), MoE (norm, gate, routing
   or dispatch, experts, combine, shared expert), dense FFN, and the rest (embedding,
   LM head, residual paths). For each, note where prefill and decode differ, the
   quantization scheme, the parallelism (TP/EP/DP) and fixed constraints such as
   layouts (BSND, TND, NZ) or the cache organisation. Discuss the KV cache together with
   the attention core: contiguous or paged, and whether writes index by position
   (kv_len) or by slot (slot_mapping / cache_index).

2. Match each module to a reference chain. Walk the decision tree that covers it with
   `advise` (tree + the answers you know); when the result says an answer is still
   needed, find it in the code (or ask) and call again. The trees:
{_trees(catalog)}
   A chain names the operator for each stage and the prerequisites it assumes. Compare
   it with your module and note the stages it does not cover. Multi-step fused
   operators (a norm + RoPE + cache write in one kernel, or an MLA prolog that also
   projects and writes the cache) count too: do not file such a module as a plain
   linear layer.

3. For modules no chain covers, `search` with a task phrase ("rms norm rope cache",
   "moe routing", "dynamic per-token quantization") and read the candidates with
   `show` (`brief` first, then `section`: parameters, constraints, quantization,
   versions).

4. Judge fit against the target: product support, the torch_npu release that ships the
   operator (versions), dtypes and formats of each tensor, allowed argument values,
   the quantization scheme, prefill/decode, graph mode. Mark each candidate:
   candidate (fits), needs-prerequisite (fits after work such as RoPE precompute, a
   paged KV cache or NZ weights: list it) or not-applicable (only for a hard
   constraint, quoted as evidence: an error message or a documented limit; "a big
   change" is not evidence).

5. Write the candidate list (YAML; the format is in docs/candidate-list.md) with one
   entry per module and phase, including args, tensors and chain where you know them,
   and run `check` on it (as text). Fix every error; read a code with `rules`. Repeat
   until `check` reports no errors.

6. Only then change code: one module at a time, prerequisites first; compare outputs
   (accuracy) and timings (performance) before and after; keep a change only when both
   hold, otherwise revert it and record the error, what was tried and the conclusion.
   Leave no module of the list unhandled."""


def _classes(playbook: Record, window: str | None = None, target: bool | None = None) -> str:
    chosen = [
        c
        for c in playbook["op_classes"]
        if (window is None or c["window"] == window)
        and (target is None or c["weight_heavy"] == target)
    ]
    return "; ".join(f"{c['id']} ({', '.join(c['names'][:4])})" for c in chosen)


def prefetch(
    model: Annotated[str, Field(description="the model being tuned")] = "",
    product: Annotated[str, Field(description="target product, e.g. atlas-a2")] = "",
    graph_mode: Annotated[str, Field(description="eager, aclgraph or torchair")] = "",
) -> str:
    """Add npu_prefetch weight prefetching where profiling shows memory-bound weight
    consumers: choose target and window, size max_size conservatively, guard it with a
    switch that is off by default, validate one point at a time."""
    from kb.api.prefetch_size import playbook_record

    book = playbook_record(current_catalog())
    if book is None:
        return "The prefetch playbook record is missing from the knowledge base; run 'kb validate'."
    extra = f"graph mode: {graph_mode}" if graph_mode else ""
    ladder = ", ".join(str(x) for x in book["ladder"])
    success = "\n".join(f"   - {s}" for s in book.get("success") or [])
    failures = "\n".join(f"   - {f['signal']} -> {f['action']}" for f in book.get("failures") or [])
    return f"""\
You are adding weight prefetch (torch_npu.npu_prefetch) to speed up memory-bound
weight consumers. Work through these steps with the torch_npu knowledge-base tools
(`show prefetch` is the playbook they come from).
{_target(model, product, "", extra)}

1. Start from evidence. Prefetch only where a profile shows a weight consumer is
   memory-bound. Weight-heavy targets: {_classes(book, target=True)}.
   Not targets (they are windows at best): norms, RoPE, activations, casts, routing.

2. Choose the window: an op before the target on the same critical path, close to it
   (same or adjacent layer), with some run time, that does not itself fight for memory
   bandwidth.
   Safe windows: {_classes(book, window="safe")}.
   Only once finished (trigger on their output): {_classes(book, window="output-only")}.
   Never: {_classes(book, window="unsafe")}.
   If every reasonable predecessor is communication or a large data move, say that the
   phase has no safe window instead of forcing a prefetch in.

3. Size it with `prefetch_size` (shape and dtype, or hidden/intermediate, or the MoE
   sizes). Start at the conservative factor {book["conservative_factor"]} of the
   weight's bytes and move along the ladder {ladder} only after profiling.

4. Plan the code change: a config switch (e.g. enable_prefetch) that defaults to off,
   passed from the config to the module; the guarded npu_prefetch call with max_size
   and the dependency tensor. Under aclgraph or torchair the dependency must be a real
   tensor produced right before the window, in the same branch and phase.

5. Write each point as a prefetch candidate (kind: prefetch, with target, target_op,
   weight, dependency, max_size, switch, switch_default, validated) and run `check`;
   fix every error.

6. Prove one point before adding the next. Profile with the switch off and on.
   Success (at least two should hold):
{success}
   Failure signals:
{failures}
   Then fix the size and move the dependency earlier or later; only then add targets.
   Report the numbers before and after, and mark the point validated."""


@dataclass(frozen=True)
class PromptSpec:
    name: str
    title: str
    fn: Callable[..., str]


PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec("fusion", "Fusion workflow: replace modules with fused operators", fusion),
    PromptSpec("prefetch", "Prefetch workflow: npu_prefetch for memory-bound weights", prefetch),
)
