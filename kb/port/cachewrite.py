"""Cache writes by position: ``cache[:, :, pos] = k`` and ``cache.index_copy_(2, pos, k)``
into ``npu_scatter_nd_update_`` (the ``cache_write_scatter`` row).

A write counts when it lands in module state (the target is, or was assigned from,
``self.<attr>``), in something the code calls a cache, or (``index_copy_``) in a parameter
of a function outside any class (a helper writing the tensor its caller hands in), at one
axis ``d`` with every axis before it whole or its first rows (``cache[:bsz, s:e] = k``
writes the view ``cache[:bsz]``): the positions may be an index tensor or a
``start:stop`` slice.  The
port writes one index row per element of the axes before ``d`` and per position
(``[..., d + 1]`` indices), the axes after ``d`` written whole, so any cache layout works.

A write is in place, so the stage goes through ``_kb_stage_inplace``: under ``kb verify``
each side writes from the same cache state and the two written caches are compared.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from kb.port.spans import code, dotted, keyword

ROWS = {"cache_write_scatter"}


def _full(el: cst.SubscriptElement) -> bool:
    s = el.slice
    return (
        isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None
    ) or (isinstance(s, cst.Index) and isinstance(s.value, cst.Ellipsis))


def _prefix(el: cst.SubscriptElement) -> str | None:
    """``n`` of a leading ``:n`` (the first n rows of an axis, as ``cache[:bsz]``)."""
    s = el.slice
    if isinstance(s, cst.Slice) and s.lower is None and s.upper and s.step is None:
        return code(s.upper)
    return None


def positions(target: cst.Subscript) -> tuple[str, int, str, str] | None:
    """(positions as a tensor expression, axis, the key as a tuple expression, the view
    written: ``[:n]`` of leading ``:n`` axes, else '') of ``c[:, :, P]`` (trailing ``:``
    allowed; leading ``:n`` too, the write then goes into the view ``c[:n]``); a
    ``start:stop`` slice becomes ``torch.arange``."""
    els = list(target.slice)
    lead = 0
    rows: list[str] = []
    while lead < len(els) and (_full(els[lead]) or _prefix(els[lead]) is not None):
        if isinstance(els[lead].slice, cst.Index):  # an Ellipsis: the axis is not known
            return None
        rows.append(_prefix(els[lead]) or "")
        lead += 1
    if lead == len(els) or not all(_full(e) for e in els[lead + 1 :]):
        return None
    view = "[{}]".format(", ".join(f":{n}" for n in rows)) if any(rows) else ""
    s = els[lead].slice
    whole = ["slice(None)"] * (len(els) - 1)
    if isinstance(s, cst.Index) and s.star is None:
        if isinstance(s.value, (cst.Integer, cst.SimpleString)):
            return None  # one fixed slot: an update, not a write by position
        at = code(s.value)
        return at, lead, "({},)".format(", ".join([*whole[:lead], at, *whole[lead:]])), view
    if isinstance(s, cst.Slice) and s.lower and s.upper and s.step is None:
        lo, hi = code(s.lower), code(s.upper)
        key = "({},)".format(", ".join([*whole[:lead], f"slice({lo}, {hi})", *whole[lead:]]))
        return f"torch.arange({lo}, {hi})", lead, key, view
    return None


def is_state(text: str, resolved: str) -> bool:
    """The written tensor outlives the call: module state or a cache by its name."""
    names = (text, resolved)
    return any(n.startswith("self.") or "cache" in n.lower() for n in names if n)


def handed_in(porter: Any, target: str) -> bool:
    """The written tensor is (a part of) a parameter of a function outside any class: a
    helper writing the tensor its caller hands in (``t.index_copy_(dim, idx, val)``,
    ``t[i].index_copy_(...)``), which the caller's cache keeps."""
    base = target.split("[", 1)[0].split(".", 1)[0]
    return bool(not porter.cls and porter.params and base in porter.params[-1])


def slot_write(node: cst.Assign, resolve: Any, before: int) -> tuple[str, ...] | None:
    """(cache, axis, positions, key, value) of a write ``cache[:, :, pos] = value`` into
    state; ``resolve(name, before)`` is the value a name was last assigned."""
    target = node.targets[0].target if len(node.targets) == 1 else None
    if not isinstance(target, cst.Subscript):
        return None
    found = positions(target)
    cache = code(target.value)
    known = resolve(cache, before) if cache.isidentifier() else None
    if found is None or not is_state(cache, code(known[0]) if known else ""):
        return None
    pos, axis, key, view = found
    return cache + view, str(axis), pos, key, code(node.value)


def index_copy(call: cst.Call) -> tuple[str, str, str, str] | None:
    """(cache, axis, index, source) of ``cache.index_copy_(dim, index, source)``."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "index_copy_"):
        return None
    dim, index, source = (keyword(call, n, i) for i, n in enumerate(("dim", "index", "source")))
    if not (dim and index and source):
        return None
    return code(func.value), dim, index, source


def copy_stage(porter: Any, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
    """The in-place stage an ``index_copy_`` of module state becomes (None: not one).

    ``porter`` is the module's :class:`kb.port.rewrite.Porter`: it knows the planned
    cache-write stage and registers the rewritten span."""
    copy = index_copy(updated)
    stage = porter._cache_stage() if copy else None
    if not (copy and stage and (is_state(copy[0], "") or handed_in(porter, copy[0]))):
        return None
    cache, axis, pos, value = copy
    sid = porter._register(stage, original, args={"dim": axis, "indices": pos})
    porter.result.helpers += ["_kb_scatter_write", "_kb_stage_inplace"]
    return cst.parse_expression(statement(sid, cache, axis, pos, value, code(updated)))


def why_not(facts: dict[str, Any], operator: str = "npu_scatter_nd_update_") -> str:
    """Why a planned cache write was not rewritten, from how the reader saw the cache kept
    (``operator``: the chain's cache-write operator)."""
    kept = facts.get("cache")
    if kept == "cat":
        return (
            "the cache grows by torch.cat, so there is no cache to write in place and the "
            "port leaves it as it is; prerequisite: a preallocated KV cache (the chains' "
            "paged-kv-cache), written by position (cache[:, :, pos] = k or index_copy_), "
            f"which kb port writes as {operator}"
        )
    if kept == "update":
        return (
            "the cache object's update() does the write in the library's code, outside this "
            "file: port the cache class (its writes by position) or use the paged cache"
        )
    return "no write by position into a cache or module state was found (see the port guide)"


def statement(sid: str, cache: str, axis: str, pos: str, value: str, unfused: str) -> str:
    """The in-place stage call that replaces the write."""
    fused = f"_kb_scatter_write({cache}, {axis}, {pos}, {value})"
    return f"_kb_stage_inplace({sid!r}, {cache}, lambda: {fused}, lambda: {unfused})"


HELPERS = {
    "_kb_scatter_write": '''

def _kb_scatter_write(cache, dim, positions, value):
    """cache[(:,) * dim + (positions,)] = value in place as npu_scatter_nd_update_: one index
    row (every axis before dim, then the position) per element written, the axes after dim
    whole."""
    positions = torch.as_tensor(positions, device=cache.device)
    if positions.dim() == 0 and value.dim() == cache.dim() - 1:  # one position: no axis
        value = value.unsqueeze(dim)
    positions = positions.reshape(-1).long()
    axes = [torch.arange(n, device=cache.device) for n in cache.shape[:dim]]
    indices = torch.stack(torch.meshgrid(*axes, positions, indexing="ij"), dim=-1)
    shape = (*cache.shape[:dim], positions.numel(), *cache.shape[dim + 1 :])
    updates = value.to(cache.dtype).expand(shape).contiguous()
    torch_npu.npu_scatter_nd_update_(cache, indices, updates)
    return cache
''',
    "_kb_stage_inplace": '''

def _kb_stage_inplace(stage, target, fused, unfused):
    """A stage that writes target in place: under kb verify both sides write from the
    same state (the original's result kept aside), the fused one's write stays."""
    if KB_PORT_UNFUSED:
        return unfused()
    if KB_PORT_PROBE is None:
        return fused()
    before = target.clone()

    def original():
        unfused()
        written = target.clone()
        target.copy_(before)
        return written

    result = KB_PORT_PROBE(stage, fused, original)
    if result is not target:  # the fused call was not measured: the original's write
        target.copy_(result)
    return target
''',
}


def plain_container(porter: Any, target: str) -> bool:
    """``self.X`` that the enclosing class sets to a dict, list or set (``{}``, ``[]``,
    ``dict()``, ...): an item stored into it is a lookup table's entry, not a cache write."""
    cls = porter.classes.get(porter.cls[-1]) if porter.cls else None
    if cls is None or not target.startswith("self."):
        return False
    found: list[bool] = []

    class Seek(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(code(t.target) == target for t in node.targets):
                v = node.value
                found.append(
                    isinstance(v, (cst.Dict, cst.List, cst.Set, cst.DictComp, cst.ListComp))
                    or (isinstance(v, cst.Call) and dotted(v.func) in ("dict", "list", "set"))
                )

    cls.visit(Seek())
    return any(found)
