"""Overloads: a call is bound against every overload the operator registers.

torch_npu registers some operators twice: the functional form and an ``.out`` overload
that writes into buffers the caller passes (``npu_apply_adam_w.out``), and a few only as
``.out`` (``npu_hans_encode``).  The generated ``torch_npu.X`` function takes the ``.out``
overload as the functional call plus ``out=(...)``; an overload packet
(``torch.ops.atb.npu_ring_mla``, ``torch_npu.atb.X``) takes its outputs by name
(``output=``, ``softmax_lse=``).  Either way the buffers are not arguments of the
functional schema: they are taken off the call before it is bound, so the rest is judged
against the functional parameters, and nothing is "unknown" that an overload accepts.
The ``.out`` schemas come from ``kb/data/known_ops.json`` (``out_overloads``).

Some overloads take what the functional form does not: ``.out`` forms may add keyword
parameters besides their buffers (FIA's ``workspace=``), other overloads other
parameters (``npu_format_cast.Tensor``'s ``dst``).  A call the functional schema rejects
is bound against each overload the record or the known ``.out`` schemas register, in
the form the call reaches it by (the torch_npu function: ``out=``; a ``torch.ops``
packet: the buffers by name); the first that accepts it is the binding, and what only
that overload takes is judged by the binding alone (the record's rules know the
functional parameters).  An error stays only when every overload rejects the call.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kb.scan.binding import Bound, bind, bind_releases, schema_params
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


def bind_call(
    site: CallSite, ctx: Any, record: dict[str, Any] | None, schemas: list[tuple[str, str]]
) -> Bound:
    """The binding of a call (module docstring): the functional form's, unless another
    overload fits the call better (fewer problems and unknown keywords; none when it
    accepts the call)."""
    plain = as_functional(site, ctx, record)
    if record is None:
        return bind_unrecorded(plain, ctx)
    bound = bind_releases(plain, record, schemas)
    best = _misfit(bound, plain, record.get("parameters") or [])
    if not best or site.op.overload not in (None, "default"):
        return bound  # accepted, or the overload is named: no other one is reached
    chosen: tuple[Bound, list[dict[str, Any]]] | None = None
    for params in _alternatives(site, ctx, record):
        other = bind(site, record, params)
        misfit = _misfit(other, site, params)
        if misfit < best:
            best, chosen = misfit, (other, params)
        if not misfit:
            break
    return bound if chosen is None else _record_view(*chosen, record)


def _misfit(bound: Bound, site: CallSite, params: list[dict[str, Any]]) -> int:
    """How far a binding is from accepting the call: its problems and the keywords that
    name no parameter (0: the overload accepts the call)."""
    from kb.catalog.binding import python_name

    python = site.op.binding == "python"
    names = {python_name(p) if python else p["name"] for p in params}
    return len(bound.problems) + len(set(site.keywords) - names)


def _alternatives(site: CallSite, ctx: Any, record: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Each other overload's parameters as the call reaches it: an ``.out`` overload
    through the torch_npu function takes ``out=`` for its buffers."""
    from kb.catalog.knownops import load

    key = ("overloads", record["name"])
    if key not in ctx.memo:
        texts = [str(o.get("schema")) for o in record.get("overloads") or [] if o.get("schema")]
        texts += [t for t in load().out_schemas(record["name"]) if t not in texts]
        parsed = [schema_params(record, t) for t in texts]
        ctx.memo[key] = [p for p in parsed if p]
    out: list[list[dict[str, Any]]] = []
    for params in ctx.memo[key]:
        buffers = [p for p in params if p.get("keyword_only") and p.get("mutated")]
        if not buffers:
            out.append(params)
        elif site.op.binding == "python":
            out.append([*functional(params), _OUT_PARAM])
        else:
            out.append(params)
    return out


#: The ``out=`` keyword of a torch_npu function reaching an ``.out`` overload.
_OUT_PARAM = {"name": OUT_KEYWORD, "type": "Tensor[]", "keyword_only": True, "required": True}


def _record_view(bound: Bound, params: list[dict[str, Any]], record: dict[str, Any]) -> Bound:
    """A binding to another overload as the record's rules read it: what only that
    overload takes (its buffers, ``workspace``, ``dst``) was judged by the binding; a
    keyword no parameter names stays for KB104."""
    known = {p["name"] for p in record.get("parameters") or []}
    only = {p["name"] for p in params} - known

    def keep(name: str) -> bool:
        return name not in only

    bound.args = {k: v for k, v in bound.args.items() if keep(k)}
    bound.tensors = {k: v for k, v in bound.tensors.items() if keep(k)}
    bound.passed = {k for k in bound.passed if keep(k)}
    bound.entries = {k: v for k, v in bound.entries.items() if keep(k)}
    return bound
