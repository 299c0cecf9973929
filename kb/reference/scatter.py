"""In-place scatters into caches and the gather of a paged cache back to contiguous rows.
Each writes into the array the call passes (the operators mutate those arguments)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.reference.errors import NotModelled, ReferenceInputError

Args = dict[str, Any]


def scatter_nd_update(a: Args) -> np.ndarray:
    """self[tuple(indices[i])] = updates[i] for every leading position i of indices; a
    repeated index keeps the last update."""
    data, idx, upd = a["self"], np.asarray(a["indices"]), a["updates"]
    if idx.ndim < 2 or not 1 <= idx.shape[-1] <= data.ndim:
        raise ReferenceInputError(
            "npu_scatter_nd_update_: indices is at least 2-D, its last dim at most input's rank"
        )
    depth = idx.shape[-1]
    want = (*idx.shape[:-1], *data.shape[depth:])
    if tuple(upd.shape) != want:
        raise ReferenceInputError(
            f"npu_scatter_nd_update_: updates must be {want}, not {tuple(upd.shape)}"
        )
    flat_idx = idx.reshape(-1, depth).astype(np.int64)
    if flat_idx.size and ((flat_idx < 0).any() or (flat_idx >= np.array(data.shape[:depth])).any()):
        raise ReferenceInputError("npu_scatter_nd_update_: an index lies outside input")
    flat_upd = upd.reshape(-1, *data.shape[depth:])
    for row, where in enumerate(flat_idx):
        data[tuple(where)] = flat_upd[row]
    return data


def scatter_update(a: Args) -> np.ndarray:
    """1-D indices: batch i (the first dim) takes updates[i] along ``axis`` starting at
    offset indices[i]."""
    data, idx, upd = a["self"], np.asarray(a["indices"]), a["updates"]
    if data.ndim < 2 or upd.ndim != data.ndim:
        raise ReferenceInputError("scatter_update_: self is 2-8 D and updates has its rank")
    if idx.ndim != 1:
        raise NotModelled(
            "scatter_update_: 2-D indices are not modelled; pass one offset per batch"
        )
    axis = int(a["axis"])
    if not -data.ndim <= axis < data.ndim or axis % data.ndim == 0:
        raise ReferenceInputError(f"scatter_update_: axis={axis} names a dim after the batch dim")
    axis %= data.ndim
    if idx.shape[0] != data.shape[0] or upd.shape[0] != data.shape[0]:
        raise ReferenceInputError(
            "scatter_update_: indices and updates have one entry per batch of self"
        )
    others = [d for d in range(1, data.ndim) if d != axis]
    if any(upd.shape[d] != data.shape[d] for d in others):
        raise ReferenceInputError("scatter_update_: updates matches self except along axis")
    span = upd.shape[axis]
    for i, start in enumerate(idx.astype(np.int64).tolist()):
        if not 0 <= start <= data.shape[axis] - span:
            raise ReferenceInputError(
                f"scatter_update_: offset {start} + {span} rows pass the end of axis {axis}"
            )
        where: list[Any] = [i] + [slice(None)] * (data.ndim - 1)
        where[axis] = slice(start, start + span)
        data[tuple(where)] = upd[i]
    return data


def gather_pa_kv_cache(a: Args) -> None:
    """Batch i's first seq_lens[i] tokens are read from its block_tables row (starting at
    block seq_offset[i] // block_size when given), token j from block j // block_size, row
    j % block_size; the rows land one after another in key/value; a block outside the
    cache reads zeros."""
    kc, vc, key, value = a["key_cache"], a["value_cache"], a["key"], a["value"]
    if (
        kc.ndim != 4
        or vc.ndim != 4
        or kc.shape[2:] != key.shape[1:]
        or vc.shape[2:] != value.shape[1:]
    ):
        raise NotModelled(
            "npu_gather_pa_kv_cache: ND caches [blocks, block_size, N, D] with key/value [T, N, D] "
            "are modelled (the NZ layout is chosen by format, which arrays do not carry)"
        )
    lens = np.asarray(a["seq_lens"]).reshape(-1).astype(np.int64)
    if a["is_seq_lens_cumsum"]:
        lens = np.diff(lens)
    tables = np.asarray(a["block_tables"])
    offsets = (
        None
        if a["seq_offset"] is None
        else np.asarray(a["seq_offset"]).reshape(-1).astype(np.int64)
    )
    blocks, bs = kc.shape[0], kc.shape[1]
    row = 0
    for i, length in enumerate(lens.tolist()):
        first = 0 if offsets is None else int(offsets[i]) // bs
        for j in range(int(length)):
            if row >= key.shape[0]:
                return
            slot = first + j // bs
            block = int(tables[i, slot]) if slot < tables.shape[1] else -1
            if 0 <= block < blocks:
                key[row], value[row] = kc[block, j % bs], vc[block, j % bs]
            else:
                key[row], value[row] = 0, 0
            row += 1
