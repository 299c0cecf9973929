"""Sliding-window attention: the window a layer keeps, passed to the fused kernel.

The reader's facts (:mod:`kb.scan.model.match_window`) say which attribute holds a
layer's window (None on layers that see every earlier key) and whether a window of W keys
counts the current one.  The port passes that attribute's value at run time, so each
layer gets its own window, and the helper turns it into the kernel's band:

* ``sparse_mode=4`` with the compressed 2048 x 2048 mask, ``next_tokens=0`` and
  ``pre_tokens`` = the earlier keys a query sees: W - 1 when the window counts the current
  key (the row ``attention_sliding_window``), W when it does not.  The band keeps
  ``-pre_tokens <= j - i - (Skv - Sq) <= next_tokens`` (:mod:`kb.reference.masks`, mode 4).
  Sources: Ascend/op-plugin 517f2e7d0f20,
  docs/zh/custom_APIs/torch_npu/torch_npu-npu_fused_infer_attention_score.md:204-216
  (pre_tokens/next_tokens, "invalid when Q_S=1"; sparse_mode 4 = band with the optimised
  mask) and op_plugin/config/op_plugin_functions.yaml:6177 (``int pre_tokens=2147483647,
  int next_tokens=2147483647``, ``int sparse_mode=0``).
* one query row (decode): the kernel ignores the band there (same page), so the helper
  passes only the keys the window keeps and no mask.
* learned sinks: npu_fused_infer_attention_score_v2's ``learnable_sink`` (bfloat16, shape
  (Q_N,): docs/zh/custom_APIs/torch_npu/torch_npu-npu_fused_infer_attention_score_v2.md:126
  and its constraints from :298; ``Tensor? learnable_sink=None`` in
  op_plugin/config/op_plugin_functions.yaml:6194, same commit); kb.reference's attention
  joins the sink column to each row's softmax and leaves it out of the output, the
  computation the ported code writes.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from kb.port.spans import Stage

HELPERS: dict[str, str] = {
    "_kb_window_attention": '''

def _kb_window_attention(query, key, value, scale=None, window=None, counts_current=True):
    """Causal attention on [B, N, S, D] tensors; with a window, each query sees only the
    last keys of it (counts_current: the window of W keys includes the query's own)."""
    if window is None:
        return _kb_attention(query, key, value, None, scale, sparse_mode=3)
    pre = window - 1 if counts_current else window
    if query.shape[2] == 1:  # one query row: the kernel ignores pre/next tokens
        key, value = key[:, :, -(pre + 1):], value[:, :, -(pre + 1):]
        return _kb_attention(query, key, value, None, scale, sparse_mode=0)
    return _kb_attention(query, key, value, None, scale, sparse_mode=4, pre_tokens=pre,
                         next_tokens=0)
''',
    "_kb_sink_attention": '''

def _kb_sink_attention(query, key, value, sink, scale=None, window=None, counts_current=True):
    """Causal attention on [B, N, S, D] tensors with one learned sink logit per query head
    (its column joins every row's softmax and adds nothing to the output), through the
    v2 kernel's learnable_sink in the TND layout; a window as _kb_window_attention."""
    b, n, sq, d = query.shape
    scale = d ** -0.5 if scale is None else scale
    mode, pre = 3, 2147483647
    if window is not None:
        mode, pre = 4, window - 1 if counts_current else window
        if sq == 1:  # one query row: the kernel ignores pre/next tokens
            key, value = key[:, :, -(pre + 1):], value[:, :, -(pre + 1):]
    skv = key.shape[2]
    band = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=query.device), 1)
    out = torch_npu.npu_fused_infer_attention_score_v2(
        query.transpose(1, 2).reshape(b * sq, n, d),
        key.transpose(1, 2).reshape(b * skv, key.shape[1], d),
        value.transpose(1, 2).reshape(b * skv, value.shape[1], value.shape[-1]),
        atten_mask=band,
        actual_seq_qlen=[sq * (i + 1) for i in range(b)],
        actual_seq_kvlen=[skv * (i + 1) for i in range(b)],
        learnable_sink=sink.to(query.dtype),
        num_query_heads=n,
        num_key_value_heads=key.shape[1],
        softmax_scale=scale,
        input_layout="TND",
        sparse_mode=mode,
        pre_tokens=pre,
        next_tokens=0,
    )[0]
    return out.reshape(b, sq, n, -1).transpose(1, 2)
''',
}


def _owner_passes(cls: cst.ClassDef | None, attr: str) -> bool:
    """The class hands ``attr=self.attr`` to a call (its attention function)."""
    if cls is None:
        return False
    found = []

    class Seek(cst.CSTVisitor):
        def visit_Arg(self, node: cst.Arg) -> None:
            v = node.value
            if (
                node.keyword is not None
                and node.keyword.value == attr
                and isinstance(v, cst.Attribute)
                and isinstance(v.value, cst.Name)
                and v.value.value == "self"
                and v.attr.value == attr
            ):
                found.append(node)

    cls.visit(Seek())
    return bool(found)


def _hands_window(cls: cst.ClassDef | None) -> str:
    """``name=value`` of a keyword naming a window that the class passes to a call (its
    value not a literal None), '' when there is none."""
    if cls is None:
        return ""
    found: list[str] = []

    class Seek(cst.CSTVisitor):
        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None and "window" in node.keyword.value:
                value = cst.Module([]).code_for_node(node.value).strip()
                if value != "None":
                    found.append(f"{node.keyword.value}={value}")

    cls.visit(Seek())
    return found[0] if found else ""


def _handed_through_kwargs(porter: Any, handed: str) -> tuple[str, bool] | None:
    """A window the class hands by keyword (``sliding_window=<config value>``, one for
    every layer) read where the span runs, from the function's ``**kwargs`` that receive
    it; the current key counted as the file's window comparisons or mask builder say.
    None when the span's function takes no ``**kwargs`` or the file does not say."""
    from kb.scan.model.match_window import counts_current_in

    if porter.cls:  # a method of the class itself: its value is not in a **kwargs
        return None
    fn = enclosing(porter)
    star = fn.params.star_kwarg if fn is not None else None
    if star is None:
        return None
    counts = counts_current_in(porter.module_node.code)
    if counts is None:
        return None
    keyword = handed.split("=", 1)[0]
    return f"{star.name.value}.get({keyword!r})", counts


def enclosing(porter: Any) -> cst.FunctionDef | None:
    """The enclosing function's definition (module level or in the enclosing class)."""
    if not porter.fn:
        return None
    body = porter.module_node.body
    if porter.cls:
        cls = porter.classes.get(porter.cls[-1])
        body = cls.body.body if cls is not None else []
    return next(
        (st for st in body if isinstance(st, cst.FunctionDef) and st.name.value == porter.fn[-1]),
        None,
    )


def window_of(porter: Any, s: Stage) -> tuple[str, bool] | None:
    """(the window's value where the span runs, whether it counts the current key), None
    when the module keeps no window; raises :class:`Unported` when it cannot be passed."""
    expr = s.facts.get("sliding_window")
    if not expr:
        handed = _hands_window(porter.classes.get(s.module))
        if not handed:
            return None
        passed = _handed_through_kwargs(porter, handed)
        if passed is None:
            raise Unported(
                f"{s.module} hands {handed} to its attention call, and the reader found no "
                "window attribute to pass per layer (the port would drop the window)"
            )
        return passed
    counts = s.facts.get("window_counts_current")
    if counts not in (True, False):
        raise Unported(
            f"the window ({expr}) is not passed: whether it counts the current key is not "
            "known (the file builds its window mask with no builder kb knows)"
        )
    attr = str(expr).split(".", 1)[-1]
    if porter.cls and porter.cls[-1] == s.module:
        return f"self.{attr}", bool(counts)
    fn = enclosing(porter)
    star = fn.params.star_kwarg if fn is not None else None
    if not (star is not None and _owner_passes(porter.classes.get(s.module), attr)):
        raise Unported(
            f"the window ({expr}) is not passed: {s.module} does not hand {attr}= to "
            "this function's keyword arguments"
        )
    return f"{star.name.value}.get({attr!r})", bool(counts)


def _window_args(win: tuple[str, bool] | None) -> dict[str, Any]:
    if win is None:
        return {"sparse_mode": 3}
    value, counts = win
    return {
        "sparse_mode": f"4 if {value} is not None else 3",
        "pre_tokens": f"{value} - 1" if counts else value,
        "next_tokens": 0,
        "window": value,
        "counts_current": counts,
    }


def window_call(
    porter: Any, s: Stage, q: str, k: str, v: str, scale: str
) -> tuple[str | None, dict[str, Any]]:
    """(the fused call for a windowed module, extra stage args), or (None, {}) when the
    module keeps no window; raises :class:`Unported` with the reason the port cannot
    pass the window."""
    win = window_of(porter, s)
    if win is None:
        return None, {}
    porter.result.helpers += ["_kb_attention", "_kb_window_attention"]
    value, counts = win
    fused = f"_kb_window_attention({q}, {k}, {v}, {scale}, window={value}, counts_current={counts})"
    return fused, _window_args(win)


def sink_call(
    porter: Any, s: Stage, q: str, k: str, v: str, scale: str, sink: str
) -> tuple[str, dict[str, Any]]:
    """The fused call of a causal attention with one learned sink logit per head (and the
    module's window, if it keeps one): npu_fused_infer_attention_score_v2's learnable_sink
    (the row's optional argument; the kernel's reference joins the sink column to each
    row's softmax and leaves it out of the output, :func:`kb.reference.attention.attend`)."""
    win = window_of(porter, s)
    value, counts = win if win is not None else ("None", True)
    porter.result.helpers.append("_kb_sink_attention")
    fused = (
        f"_kb_sink_attention({q}, {k}, {v}, {sink}, {scale}, window={value}, "
        f"counts_current={counts})"
    )
    return fused, {**_window_args(win), "learnable_sink": sink, "input_layout": "TND"}


class Unported(Exception):
    """A windowed attention the port leaves as it is (the message says why)."""
