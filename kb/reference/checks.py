"""Hold a bound call to its record (tensor dtypes, closed value sets, ranges, required
tensors) and to a work cap, before any reference allocates.

The messages name the record's constraint, so a wrong dtype in an example or a mapping
fails with the fact it contradicts.  The work estimate is the one place that knows how
large a call's outputs and intermediates get from its shapes and size-setting scalars:
every input element (each is read into float32), plus a per-operator rule where an output
outgrows the inputs (attention's score matrix, matmul products, routing's expanded rows,
broadcasts, sizes given as scalars).  Nothing is allocated before the estimate passes the
caller's cap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from kb.catalog.binding import dtype_value, python_name
from kb.reference.errors import OverCap, ReferenceInputError
from kb.reference.lowp import name_of
from kb.reference.registry import WIDENED

Args = dict[str, Any]
#: bytes a reference holds per element of its largest work array (a few float32 copies)
BYTES_PER_ELEMENT = 16
#: the cap when the caller sets none (a process computing one operator at a time)
DEFAULT_MAX_BYTES = 4 * 2**30
_STATE = threading.local()


@contextmanager
def limit(max_bytes: int | None) -> Iterator[None]:
    """Cap the estimated work of every reference call in this thread (None: no cap)."""
    before = getattr(_STATE, "cap", DEFAULT_MAX_BYTES)
    _STATE.cap = max_bytes
    try:
        yield
    finally:
        _STATE.cap = before


def current_cap() -> int | None:
    return getattr(_STATE, "cap", DEFAULT_MAX_BYTES)


def _arrays(value: Any) -> list[np.ndarray]:
    items = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in items if isinstance(v, np.ndarray)]


def _tensor_check(rec: dict[str, Any], p: dict[str, Any], value: Any) -> None:
    listed = "[]" in p["type"]
    required = "?" not in p["type"] and p.get("required", True)
    empty = value is None or (isinstance(value, (list, tuple)) and not value)
    if required and empty:
        raise ReferenceInputError(
            f"{rec['name']}: {python_name(p)!r} needs a tensor"
            f"{' list with at least one tensor' if listed else ''}, not {value!r}"
        )
    if not listed and isinstance(value, (list, tuple)) and value:
        raise ReferenceInputError(
            f"{rec['name']}: {python_name(p)!r} is one tensor, not a {type(value).__name__}"
        )
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if item is None:
            continue
        if not isinstance(item, np.ndarray):
            raise ReferenceInputError(
                f"{rec['name']}: {python_name(p)} must be a numpy array, not {type(item).__name__}"
            )
        dtypes = p.get("dtypes") or []
        if dtypes and not p.get("any_dtype"):
            have = name_of(item)
            if have not in dtypes:
                raise ReferenceInputError(
                    f"{rec['name']}: {python_name(p)} dtype {have} is not one the record "
                    f"lists ({', '.join(dtypes)})"
                )


def _value_check(rec: dict[str, Any], p: dict[str, Any], value: Any) -> None:
    allowed = p.get("allowed")
    shown = dtype_value(p, value) if p.get("takes") == "dtype" else value
    if allowed is not None and value is not None:
        values = (
            shown
            if isinstance(shown, list) and not any(isinstance(a, list) for a in allowed)
            else [shown]
        )
        bad = [v for v in values if v not in allowed]
        if bad:
            raise ReferenceInputError(
                f"{rec['name']}: {python_name(p)}={shown!r} is outside the record's "
                f"allowed values {allowed}"
            )
    rng = p.get("range")
    if rng and isinstance(value, (int, float)) and not isinstance(value, bool):
        if value in WIDENED.get(rec["name"], {}).get(p["name"], ()):
            return
        lo, hi = rng.get("min"), rng.get("max")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ReferenceInputError(
                f"{rec['name']}: {python_name(p)}={value} is outside the record's range "
                f"[{lo}, {hi}]"
            )


def check(rec: dict[str, Any], bound: dict[str, Any]) -> None:
    """ReferenceInputError when a bound argument contradicts the record or the call's work
    would pass the cap."""
    for p in rec.get("parameters") or []:
        value = bound.get(p["name"])
        if p["type"].startswith("Tensor"):
            _tensor_check(rec, p, value)
        else:
            _value_check(rec, p, value)
    cap = current_cap()
    if cap is not None:
        need = work_bytes(rec["name"], bound)
        if need > cap:
            raise OverCap(
                f"{rec['name']}: these shapes need about {need:,} bytes of outputs and "
                f"intermediates, above the cap of {cap:,} bytes"
            )


# ---------------------------------------------------------------- the work estimate
def envelope(shapes: list[tuple[int, ...]]) -> int:
    """Elements of the largest array any broadcast of these shapes can make: per trailing
    axis the largest size among them, multiplied."""
    rank = max((len(s) for s in shapes), default=0)
    total = 1
    for axis in range(1, rank + 1):
        total *= max((s[-axis] for s in shapes if len(s) >= axis), default=1)
    return total


def _int(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0


def _shape(a: Args, name: str) -> tuple[int, ...]:
    v = a.get(name)
    if isinstance(v, (list, tuple)):
        v = next((x for x in v if isinstance(x, np.ndarray)), None)
    return tuple(v.shape) if isinstance(v, np.ndarray) else ()


def _dim(a: Args, name: str, axis: int) -> int:
    s = _shape(a, name)
    return s[axis] if s and -len(s) <= axis < len(s) else 1


def _size(a: Args, name: str) -> int:
    return sum(int(x.size) for x in _arrays(a.get(name)))


def _lead(a: Args, name: str) -> int:
    """Elements of ``name`` over its last dim (rows, or rows times heads)."""
    return _size(a, name) // max(_dim(a, name, -1), 1)


def _kv_span(a: Args, layout: str) -> int:
    """The most key/value positions one batch can read."""
    table = a.get("block_table")
    if isinstance(table, np.ndarray) and table.ndim == 2:
        return table.shape[1] * max(_int(a.get("block_size")), 1)
    k = _shape(a, "key")
    if len(k) < 2:
        return 1
    if layout.startswith(("TND", "NTD")) or (len(k) == 3 and layout != "BSH"):
        return max(k[:2])
    return k[2] if layout == "BNSD" else k[1]


def _attention(heads: str) -> Callable[[Args], int]:
    """Query rows times heads times the key positions: the score matrix."""

    def work(a: Args) -> int:
        layout = str(a.get("input_layout") or "BSH")
        rows = _lead(a, "query") * (max(_int(a.get(heads)), 1) if layout == "BSH" else 1)
        return rows * _kv_span(a, layout)

    return work


def _broadcast(*names: str) -> Callable[[Args], int]:
    """Elementwise operators whose operands broadcast: the envelope of their shapes."""
    return lambda a: envelope([s for s in (_shape(a, n) for n in names) if s])


def _matmul(left: str, right: str) -> Callable[[Args], int]:
    """[..., M, K] @ [..., K, N]: the batch envelope times M times N."""

    def work(a: Args) -> int:
        x, w = _shape(a, left), _shape(a, right)
        if len(x) < 2 or len(w) < 2:
            return 0
        return envelope([x[:-2], w[:-2]]) * x[-2] * w[-1]

    return work


def _grouped(a: Args) -> int:
    """Every row of x against the widest weight."""
    widest = max((w.shape[-1] for w in _arrays(a.get("weight"))), default=1)
    return _lead(a, "x") * widest


def _bmm(a: Args) -> int:
    x, w = _shape(a, "input"), _shape(a, "weight")
    return envelope([x, w]) if x and w else 0


#: operator -> elements of its largest output or intermediate, where that outgrows the
#: inputs (scores, products, expanded rows, broadcasts, sizes set by scalars); every other
#: operator works in a constant multiple of its inputs
WORK: dict[str, Callable[[Args], int]] = {
    "npu_fused_infer_attention_score": _attention("num_heads"),
    "npu_fused_infer_attention_score_v2": _attention("num_query_heads"),
    "npu_prompt_flash_attention": _attention("num_heads"),
    "npu_incre_flash_attention": _attention("num_heads"),
    "npu_fusion_attention": _attention("head_num"),
    "_npu_paged_attention": lambda a: (
        _lead(a, "query") * _dim(a, "block_table", -1) * _dim(a, "key_cache", 1)
    ),
    "npu_lightning_indexer": lambda a: (
        _lead(a, "query") * (_lead(a, "key") + _int(a.get("sparse_count")))
    ),
    "npu_sparse_flash_attention": lambda a: (
        _lead(a, "query") * _dim(a, "sparse_indices", -1) * max(_int(a.get("sparse_block_size")), 1)
    ),
    "npu_quant_matmul": _matmul("x1", "x2"),
    "npu_weight_quant_batchmatmul": _matmul("x", "weight"),
    "npu_transpose_batchmatmul": _bmm,
    "npu_grouped_matmul": _grouped,
    "npu_grouped_matmul_finalize_routing": lambda a: (
        (_int(a.get("output_bs")) + _dim(a, "x", 0)) * _dim(a, "w", -1)
    ),
    "npu_mla_prolog_v3": lambda a: (
        _lead(a, "token_x")
        * (
            _size(a, "weight_uk") // max(_dim(a, "weight_uk", 1), 1)
            + _dim(a, "weight_uq_qr", -1)
            + _dim(a, "weight_dkv_kr", -1)
        )
    ),
    "npu_moe_init_routing": lambda a: _size(a, "expert_idx") * _dim(a, "x", -1),
    "npu_moe_init_routing_v2": lambda a: _size(a, "expert_idx") * _dim(a, "x", -1),
    "npu_moe_token_permute": lambda a: _size(a, "indices") * _dim(a, "tokens", -1),
    "npu_moe_token_unpermute": lambda a: (
        _size(a, "sorted_indices") * _dim(a, "permuted_tokens", -1)
    ),
    "npu_moe_finalize_routing": lambda a: (
        _size(a, "expanded_src_to_dst_row") * _dim(a, "expanded_permuted_rows", -1)
    ),
    "npu_moe_distribute_dispatch_v2": lambda a: (
        max(_int(a.get("global_bs")), _dim(a, "x", 0))
        * _dim(a, "expert_ids", -1)
        * (_dim(a, "x", -1) + 128)
    ),
    "npu_moe_distribute_combine_v2": lambda a: _dim(a, "expert_ids", 0) * _dim(a, "expand_x", -1),
    "npu_mrope": lambda a: _size(a, "positions") * _dim(a, "cos_sin_cache", -1),
    "_npu_rotary_embedding": lambda a: _size(a, "positions") * _dim(a, "cos_sin_cache", -1),
    "npu_rotary_mul": _broadcast("self", "r1", "r2"),
    "npu_apply_rotary_pos_emb": _broadcast("query", "key", "cos", "sin"),
    "npu_interleave_rope": _broadcast("x", "cos", "sin"),
    "npu_layer_norm_eval": _broadcast("input", "weight", "bias"),
    "npu_quantize": _broadcast("self", "scales", "zero_points"),
    "npu_trans_quant_param": _broadcast("scale", "offset"),
}


def work_bytes(name: str, bound: Args) -> int:
    """The estimated bytes a call works on: every input element (each is copied to float32)
    plus the operator's largest output or intermediate where its rule says it outgrows them."""
    inputs = sum(int(x.size) for v in bound.values() for x in _arrays(v))
    rule = WORK.get(name)
    return (inputs + (rule(bound) if rule else 0)) * BYTES_PER_ELEMENT
