"""The reference as readers see it: the record's semantics for ``kb show`` and the site,
and a bounded run of an operator on JSON-given arrays for the MCP ``reference`` tool.

``semantics`` reads only the record (no numpy), so showing stays light; ``run_json``
imports numpy through :mod:`kb.reference` only when it runs something.
"""

from __future__ import annotations

from typing import Any

from kb.api.errors import UsageError

Record = dict[str, Any]
GITHUB = "https://github.com"
#: bounds on what a JSON call may build: elements per array, in all, and dimensions
MAX_ELEMENTS, MAX_TOTAL, MAX_DIMS = 4096, 65536, 8
#: the work (outputs and intermediates, estimated from the shapes) one tool call may cause
MAX_WORK_BYTES = 64 * 2**20


def source_label(src: Record) -> str:
    """``Ascend/op-plugin@517f2e7 test/x.py:11-24``."""
    where = f"{src['path']}:{src['lines']}" if src.get("lines") else src["path"]
    return f"{src['repo']}@{src['commit'][:7]} {where}"


def source_url(src: Record) -> str:
    first, _, last = (src.get("lines") or "").partition("-")
    anchor = f"#L{first}" + (f"-L{last}" if last else "") if first else ""
    return f"{GITHUB}/{src['repo']}/blob/{src['commit']}/{src['path']}{anchor}"


def semantics(rec: Record) -> Record | None:
    """What the operator computes and on what authority, from its ``reference`` block."""
    ref = rec.get("reference")
    if not ref:
        return None
    return {
        "computes": ref["computes"],
        "sources": [
            {"kind": s["kind"], "label": source_label(s), "url": source_url(s), "says": s["says"]}
            for s in ref["sources"]
        ],
        "unstated": list(ref.get("unstated") or []),
        "limits": list(ref.get("limits") or []),
        "run": f"kb.reference.run({rec['name']!r}, ...)",
    }


# --------------------------------------------------------------------------- running


def _array(spec: Record, np: Any, lowp: Any, budget: list[int], where: str) -> Any:
    dtype_name = spec.get("dtype", "float32")
    if not isinstance(dtype_name, str) or dtype_name not in lowp.NUMPY:
        raise UsageError(
            f"{where}: dtype {dtype_name!r} is not one of {', '.join(sorted(lowp.NUMPY))}"
        )
    dtype = lowp.NUMPY[dtype_name]
    if "data" in spec:
        try:
            raw = np.asarray(spec["data"], dtype=np.float64 if dtype_name != "bool" else bool)
        except (ValueError, TypeError, OverflowError):
            raise UsageError(
                f"{where}: data must be a rectangular nested list of numbers"
            ) from None
    elif "shape" in spec:
        shape = spec["shape"]
        if not (
            isinstance(shape, list)
            and all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_ELEMENTS
                for d in shape
            )
        ):
            raise UsageError(
                f"{where}: shape is a list of non-negative integers "
                f"(at most {MAX_ELEMENTS} elements per array)"
            )
        fill = spec.get("fill", 0)
        if not isinstance(fill, (int, float)) or isinstance(fill, bool):
            raise UsageError(f"{where}: fill is a number")
        if len(shape) > MAX_DIMS or int(np.prod(shape, dtype=np.int64)) > MAX_ELEMENTS:
            raise UsageError(f"{where}: at most {MAX_DIMS} dims and {MAX_ELEMENTS} elements")
        raw = np.full(shape, fill, dtype=np.float64)
    else:
        raise UsageError(
            f"{where}: an array is {{'data': [...]}} or {{'shape': [...]}}, with 'dtype'"
        )
    if raw.ndim > MAX_DIMS or raw.size > MAX_ELEMENTS:
        raise UsageError(f"{where}: at most {MAX_DIMS} dims and {MAX_ELEMENTS} elements per array")
    budget[0] += raw.size
    if budget[0] > MAX_TOTAL:
        raise UsageError(f"at most {MAX_TOTAL} elements in all arrays of one call")
    if dtype_name != "bool" and not np.isfinite(raw).all() and dtype_name.startswith("int"):
        raise UsageError(f"{where}: integer data must be finite")
    return lowp.cast(raw, dtype) if dtype_name.startswith(("int", "uint")) else raw.astype(dtype)


def _value(value: Any, np: Any, lowp: Any, budget: list[int], where: str) -> Any:
    """A JSON argument as the reference takes it: arrays from objects, lists kept."""
    if isinstance(value, dict):
        return _array(value, np, lowp, budget, where)
    if isinstance(value, list):
        if any(isinstance(v, dict) for v in value):
            if len(value) > 64:
                raise UsageError(f"{where}: at most 64 tensors in a list")
            return [_value(v, np, lowp, budget, f"{where}[{i}]") for i, v in enumerate(value)]
        if len(value) > MAX_ELEMENTS or any(isinstance(v, list) for v in value):
            raise UsageError(
                f"{where}: a plain list is a flat list of scalars (arrays are objects)"
            )
        return value
    return value


def _out(value: Any, np: Any) -> Any:
    if isinstance(value, np.ndarray):
        data = value.astype(np.float64) if value.dtype.kind not in "biu" else value.astype(np.int64)
        if value.dtype.kind == "b":
            data = value
        clean = np.where(np.isfinite(data), data, 0) if data.dtype.kind == "f" else data
        out: Record = {
            "shape": list(value.shape),
            "dtype": _dtype_name(value),
            "data": clean.tolist(),
        }
        if data.dtype.kind == "f" and not np.isfinite(data).all():
            out["non_finite"] = [
                repr(x) for x in data.reshape(-1)[~np.isfinite(data.reshape(-1))][:8]
            ]
        return out
    if isinstance(value, (list, tuple)):
        return [_out(v, np) for v in value]
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value


def _dtype_name(value: Any) -> str:
    from kb.reference.lowp import name_of

    return name_of(value)


def run_json(
    name: str,
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    catalog: Any = None,
) -> Record:
    """Run ``name`` on JSON-given arguments; UsageError for anything it cannot run.
    ``catalog``: the caller's own (the MCP server's per-thread, fresh one)."""
    try:
        import numpy as np

        from kb import reference
        from kb.reference import lowp
    except ImportError as exc:
        raise UsageError(
            f"the numpy reference needs the [reference] extra (numpy, ml_dtypes): {exc}"
        ) from None
    args, kwargs = list(args or []), dict(kwargs or {})
    budget = [0]
    values = [_value(v, np, lowp, budget, f"args[{i}]") for i, v in enumerate(args)]
    named = {k: _value(v, np, lowp, budget, k) for k, v in kwargs.items()}
    try:
        rec = reference.record(name, catalog)
        with reference.limit(MAX_WORK_BYTES):
            result = reference.run_record(rec, *values, **named)
    except reference.ReferenceInputError as exc:
        raise UsageError(str(exc)) from None
    except (
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        ZeroDivisionError,
        OverflowError,
        MemoryError,
    ) as exc:
        raise UsageError(
            f"{name}: the reference cannot run on these arguments ({type(exc).__name__}: {exc})"
        ) from None
    doc: Record = {
        "operator": rec["name"],
        "returns": [r["name"] for r in rec.get("returns") or []],
    }
    outs = result if isinstance(result, tuple) else (result,) if result is not None else ()
    doc["outputs"] = [_out(v, np) for v in outs]
    mutated = [p for p in rec.get("parameters") or [] if p.get("mutated")]
    if mutated:
        from kb.catalog.binding import python_name
        from kb.reference.binding import bind

        bound = bind(rec, tuple(values), named)
        doc["mutated"] = {python_name(p): _out(bound[p["name"]], np) for p in mutated}
    return doc
