"""Overloads: a call of an operator's ``.out`` form is judged as that form.

torch_npu registers some operators twice: the functional form and an ``.out`` overload
that writes into buffers the caller passes (``npu_apply_adam_w.out``), and a few only as
``.out`` (``npu_hans_encode``).  The generated ``torch_npu.X`` function takes the ``.out``
overload as the functional call plus ``out=(...)``; an overload packet
(``torch.ops.atb.npu_ring_mla``, ``torch_npu.atb.X``) takes its outputs by name
(``output=``, ``softmax_lse=``).  Either way the buffers are not arguments of the
functional schema: they are taken off the call before it is bound, so the rest is judged
against the functional parameters, and nothing is "unknown" that an overload accepts.
The ``.out`` schemas come from ``kb/data/known_ops.json`` (``out_overloads``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kb.scan.binding import Bound, bind
from kb.scan.sites import CallSite

#: The keyword the generated torch_npu functions take an ``.out`` overload's outputs by.
OUT_KEYWORD = "out"


def out_names(out_schemas: tuple[str, ...]) -> set[str]:
    """The output buffers the ``.out`` overloads take by name (mutated keyword-only)."""
    from kb.catalog.knownops import params_of

    names: set[str] = set()
    for schema in out_schemas:
        for p in params_of(schema) or []:
            if p.get("keyword_only") and p.get("mutated"):
                names.add(p["name"])
    return names


def functional(params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An ``.out`` schema's parameters less its output buffers: the functional call."""
    return [p for p in params if not (p.get("keyword_only") and p.get("mutated"))]


def as_functional(site: CallSite, ctx: Any, record: dict[str, Any] | None) -> CallSite:
    """The call with the ``.out`` overload's buffers taken off (``out=`` or the buffers by
    name), when an overload takes them and the functional parameters do not."""
    if not site.keywords:
        return site
    from kb.catalog.binding import python_name
    from kb.catalog.knownops import load

    key = ("outs", site.op.name)
    if key not in ctx.memo:  # the buffer names of the operator's .out overloads, once
        outs = load().out_schemas(site.op.name)
        ctx.memo[key] = out_names(outs) | {OUT_KEYWORD} if outs else set()
    buffers: set[str] = ctx.memo[key]
    if not buffers or not buffers & set(site.keywords):
        return site
    params = list((record or {}).get("parameters") or [])
    accepted = {p["name"] for p in params} | {python_name(p) for p in params}
    taken = {k for k in site.keywords if k in buffers and k not in accepted}
    if not taken:
        return site
    return replace(site, keywords={k: e for k, e in site.keywords.items() if k not in taken})


def bind_unrecorded(site: CallSite, ctx: Any) -> Bound:
    """A call no record knows: bound to its upstream schema when torch_npu defines the
    operator with one schema (KB120; an operator only ``.out`` defines: its functional
    part), else its keywords as written."""
    from kb.catalog.knownops import params_of

    known = ctx.known(site.op.spelled)
    params = params_of(known.schemas[0]) if known and len(known.schemas) == 1 else None
    if known and params and known.out_only:
        params = functional(params)
    if known and params:
        return bind(site, {"name": known.name, "parameters": params})
    bound = Bound()
    for name, entry in site.keywords.items():
        bound.entries[name] = entry
    return bound
