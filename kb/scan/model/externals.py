"""External calls as the model reader reads them: library functions and tensor methods
through the canonical table of :mod:`kb.scan.model.ops`, external ``nn`` classes as leaves
(one node per call), modules of public libraries expanded into the nodes their forward
computes, activation tables indexed by a spelling, and Python's builtins."""

from __future__ import annotations

from typing import Any

from kb.scan.model.frames import Bound, Frame, TensorMethod, has_tensors, last_name
from kb.scan.model.graph import (
    UNKNOWN,
    Const,
    DictVal,
    Ext,
    Func,
    Inst,
    Node,
    Seq,
    Sym,
)
from kb.scan.model.ops import (
    ACTIVATION_LOOKUPS,
    ACTIVATION_OPS,
    CONTAINERS,
    CREATION,
    LIBRARY_CONVENTIONS,
    activation_kind,
    canonical,
    leaf_op,
)
from kb.scan.model.pybuiltins import EXT_BUILTINS, math_call

_SIZES = frozenset(
    {
        "size",
        "dim",
        "numel",
        "element_size",
        "tolist",
        "item",
        "stride",
        "data_ptr",
        "is_contiguous",
        "get_device",
        "nelement",
        "is_floating_point",
        "__len__",
    }
)
#: external calls that are false at inference (compilation and tracing probes)
_FALSE_PROBES = frozenset(
    {
        "is_grad_enabled",
        "is_scripting",
        "is_tracing",
        "is_compiling",
        "is_dynamo_compiling",
        "is_torchdynamo_compiling",
    }
)
#: attention kernels imported by their bare name (``from flash_attn import flash_attn_func``)
_KERNELS_BARE = frozenset(
    {
        "flash_attn_func",
        "flash_attn_varlen_func",
        "flash_attn_qkvpacked_func",
        "flash_attn_varlen_qkvpacked_func",
        "flash_attn_kvpacked_func",
        "flash_attn_with_kvcache",
        "scaled_dot_product_attention",
        "memory_efficient_attention",
    }
)


class Externals:
    """Leaves, library functions, tensor methods and builtins; mixed into the interpreter."""

    # -- provided by the interpreter ----------------------------------------------------------
    instances: list[Inst]
    ran: set[int]
    model_config: dict[str, Any]

    def call(
        self, func: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:  # pragma: no cover
        raise NotImplementedError

    def opaque(
        self, callee: str, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:  # pragma: no cover
        raise NotImplementedError

    def node(
        self, op: str, args: tuple[Any, ...], kw: dict[str, Any] | None, frame: Frame, at: Any
    ) -> Node:  # pragma: no cover
        raise NotImplementedError

    def set_attr(self, owner: Inst, attr: str, value: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def library_function(
        self, dotted: str, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:  # pragma: no cover - the library conventions (kb.scan.model.libbases)
        raise NotImplementedError

    def item(self, value: Any, i: int, frame: Frame, at: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def library_init(
        self, inst: Inst, kind: str, args: list[Any], kwargs: dict[str, Any], at: Any
    ) -> None:  # pragma: no cover - the library conventions (kb.scan.model.libbases)
        raise NotImplementedError

    def library_forward(
        self, inst: Inst, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:  # pragma: no cover - the library conventions (kb.scan.model.libbases)
        raise NotImplementedError

    def call_leaf(
        self, inst: Inst, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        op = inst.leaf or ""
        x = args[0] if args else next(iter(kwargs.values()), UNKNOWN)
        if op == "same":
            return x
        if op == "sequential":
            for item in inst.items:
                x = self.call(item, [x], {}, frame, at)
            return x
        if op.startswith("opaque"):
            return self.opaque(inst.name, args, kwargs, frame, at)
        if not isinstance(x, Node):
            return UNKNOWN
        if op in ("mlp", "vit_attention", "mha"):
            return self.library_module(inst, op, x, args, kwargs, frame, at)
        if op in LIBRARY_CONVENTIONS:
            return self.library_forward(inst, args, kwargs, frame, at)
        kw: dict[str, Any] = {"module": inst, **inst.kwargs}
        return self.node(op, (x, *args[1:]), kw, frame, at)

    def library_module(
        self,
        inst: Inst,
        op: str,
        x: Node,
        args: list[Any],
        kwargs: dict[str, Any],
        frame: Frame,
        at: Any,
    ) -> Any:
        """The forward of a library module the reader knows but does not follow, as nodes."""
        linear = {"module": inst}
        if op == "mlp":  # timm Mlp: fc1, act_layer(), fc2
            act_layer = inst.kwargs.get("act_layer", Ext("torch.nn.GELU"))
            act = self.call(act_layer, [], {}, frame, at)
            h = self.node("linear", (x,), linear, frame, at)
            return self.node("linear", (self.call(act, [h], {}, frame, at),), linear, frame, at)
        if op == "vit_attention":  # timm Attention: fused qkv, optional q/k LayerNorm, SDPA, proj
            qkv = self.node("linear", (x,), linear, frame, at)
            q, k, v = (self.node("part", (qkv,), {"index": Const(i)}, frame, at) for i in range(3))
            norm = inst.kwargs.get("qk_norm")
            if isinstance(norm, Const) and norm.value is True:
                q = self.node("layer_norm", (q,), {"module": inst}, frame, at)
                k = self.node("layer_norm", (k,), {"module": inst}, frame, at)
            out = self.node("sdpa", (q, k, v), {"is_causal": Const(False)}, frame, at)
            return self.node("linear", (out,), linear, frame, at)
        query, key, value = (
            (args + [x, x, x])[:3] if len(args) >= 3 else (x, x, x)
        )  # nn.MultiheadAttention
        q, k, v = (self.node("linear", (t,), linear, frame, at) for t in (query, key, value))
        flag = kwargs.get("is_causal", Const(False))
        out = self.node(
            "sdpa",
            (q, k, v),
            {"attn_mask": kwargs.get("attn_mask", Const(None)), "is_causal": flag},
            frame,
            at,
        )
        return Seq((self.node("linear", (out,), linear, frame, at), UNKNOWN))

    def leaf(self, name: str, op: str, args: list[Any], kwargs: dict[str, Any], at: Any) -> Inst:
        kept = {k: v for k, v in kwargs.items() if isinstance(v, (Const, Sym)) or k == "act_layer"}
        if op in ("linear", "layer_norm", "rms_norm", "group_norm", "embedding", "conv"):
            for i, v in enumerate(args[:2]):
                kept.setdefault(f"arg{i}", v)
        if op in LIBRARY_CONVENTIONS:  # a spelling may come by position (FeedForward's 5th)
            for i, v in enumerate(args[:6]):
                if isinstance(v, (Const, Sym)):
                    kept.setdefault(f"arg{i}", v)
        inst = Inst(name, leaf=op, kwargs=kept, line=getattr(at, "lineno", 0))
        self.instances.append(inst)
        return inst

    def activation_leaf(self, spelling: Any, at: Any) -> Inst:
        """The module an activation table returns for a spelling (unknown spelling: a leaf
        that says which value decides it)."""
        kind = activation_kind(spelling.value) if isinstance(spelling, Const) else None
        if kind is None:
            return self.leaf("activation", "activation", [], {"spelling": spelling}, at)
        kwargs: dict[str, Any] = {"spelling": spelling}
        if kind == "gelu_tanh":
            kwargs["approximate"] = Const("tanh")
        return self.leaf(
            f"activation {spelling.value}", ACTIVATION_OPS.get(kind, "activation"), [], kwargs, at
        )  # type: ignore[union-attr]

    # -- attributes -----------------------------------------------------------------------------
    def tensor_attr(self, node: Node, name: str, frame: Frame, at: Any) -> Any:
        if name in (
            "shape",
            "dtype",
            "device",
            "ndim",
            "is_cuda",
            "requires_grad",
            "layout",
            "grad",
        ):
            return Sym(name)
        if name in ("T", "mT", "H", "mH"):
            return self.node("transpose", (node,), None, frame, at)
        if name in ("real", "imag"):
            return self.node(name, (node,), None, frame, at)
        if name in ("values", "indices"):
            return self.item(node, 0 if name == "values" else 1, frame, at)
        if node.op == "input" and canonical(name) is None and name not in _SIZES:
            # a field of an argument the reader knows nothing about (model_input.tokens)
            base = node.kw.get("name")
            label = f"{base.value}.{name}" if isinstance(base, Const) else name
            return self.node(
                "input", (), {"name": Const(label), "field": Const(name), "of": node}, frame, at
            )
        if name == "data":
            return node
        return TensorMethod(node, name)

    # -- tensor methods -------------------------------------------------------------------------
    def tensor_method(
        self, tm: TensorMethod, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        name = tm.name
        if name in _SIZES:
            return Sym(f"{name}()")
        op = canonical(name)
        if op == "same":
            return tm.node
        if op is None:
            return self.node("method", (tm.node, *args), {**kwargs, "name": Const(name)}, frame, at)
        kw = dict(kwargs)
        if name.endswith("_"):
            kw["inplace"] = Const(True)
        if op == "amax" and args and isinstance(args[0], Node):
            op = "maximum"  # x.max(y): elementwise, not a reduction
        return self.node(op, (tm.node, *args), kw, frame, at)

    # -- external functions and classes -----------------------------------------------------------
    def call_ext(
        self, dotted: str, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        last = last_name(dotted)
        written = self.library_function(dotted, args, kwargs, frame, at)
        if written is not None:
            return written
        builtin = EXT_BUILTINS.get(dotted)
        if builtin is not None:
            return builtin(self, args, kwargs, frame, at)
        if last in _FALSE_PROBES:
            return Const(False)
        if last in ACTIVATION_LOOKUPS:
            return self.activation_leaf(args[0] if args else kwargs.get("act_fn", UNKNOWN), at)
        if last in ("Parameter", "Buffer"):
            inner = args[0] if args else kwargs.get("data", UNKNOWN)
            return self.node("param", (inner,) if isinstance(inner, Node) else (), None, frame, at)
        if last in CONTAINERS:
            return self.container(last, args, kwargs, at)
        if last[:1].isupper():  # an external class: a module leaf, else an opaque object
            op = leaf_op(dotted)
            if op is not None:
                inst = self.leaf(last, op, args, kwargs, at)
                if op in LIBRARY_CONVENTIONS:
                    self.library_init(inst, op, args, kwargs, at)
                return inst
            if has_tensors(args) or has_tensors(kwargs.values()):
                return self.opaque(dotted, args, kwargs, frame, at)
            return self.leaf(last, "opaque", args, kwargs, at)
        if dotted.startswith("math.") or (dotted.startswith("numpy.") and not has_tensors(args)):
            return math_call(last, args)
        op = (
            canonical(dotted)
            if "." in dotted
            else canonical(dotted)
            if dotted in _KERNELS_BARE
            else None
        )
        if op is not None and (op in CREATION or has_tensors(args) or has_tensors(kwargs.values())):
            kw = dict(kwargs)
            if op == "amax" and len(args) > 1 and isinstance(args[1], Node):
                op = "maximum"  # torch.max(x, y): elementwise, not a reduction
            if op in ("flash_attn", "xformers_attn", "sdpa"):
                kw["fn"] = Const(dotted)
            return self.node(op, tuple(args), kw, frame, at)
        return self.opaque(dotted, args, kwargs, frame, at)

    def container(self, kind: str, args: list[Any], kwargs: dict[str, Any], at: Any) -> Any:
        if kind == "Sequential":
            items = tuple(a for a in args if isinstance(a, (Inst, Func)))
            if len(args) == 1 and isinstance(args[0], DictVal):
                items = tuple(args[0].items.values())
            inst = Inst("Sequential", leaf="sequential", items=items, line=getattr(at, "lineno", 0))
            self.instances.append(inst)
            return inst
        if kind in ("ModuleDict", "ParameterDict"):
            return args[0] if args and isinstance(args[0], DictVal) else DictVal({})
        value = args[0] if args else Seq((), "list")
        return value if isinstance(value, Seq) else Seq((), "list")

    def ext_item(self, ext: Ext, key: Any) -> Any:
        """``ACT2FN["gelu"]``: an activation table indexed by a spelling."""
        if last_name(ext.dotted) in ACTIVATION_LOOKUPS:
            return self.activation_leaf(key, None)
        return UNKNOWN

    def call_bound(self, b: Bound, args: list[Any], kwargs: dict[str, Any]) -> Any:
        value, name = b.value, b.name
        if isinstance(
            value, Inst
        ):  # nn.Module's own API: register_buffer("k_cache", t), add_module
            if (
                name in ("register_buffer", "register_parameter", "add_module")
                and len(args) >= 2
                and isinstance(args[0], Const)
                and isinstance(args[0].value, str)
            ):
                self.set_attr(value, args[0].value, args[1])
            return Const(None) if name != "to" else value
        if isinstance(value, DictVal):
            if name == "get" and args and isinstance(args[0], Const):
                try:
                    return value.items.get(args[0].value, args[1] if len(args) > 1 else Const(None))
                except TypeError:
                    return UNKNOWN
            if name == "values":
                return Seq(tuple(value.items.values()), "list")
            if name == "keys":
                return Const(tuple(value.items))
            if name == "items":
                return Seq(tuple(Seq((Const(k), v)) for k, v in value.items.items()), "list")
        if isinstance(value, Seq) and name in ("append", "extend", "insert"):
            return Const(None)  # the caller rebinds the grown list (Expressions.ex_call)
        if (
            isinstance(value, Const)
            and isinstance(value.value, str)
            and name in ("lower", "upper", "strip")
        ):
            return Const(getattr(value.value, name)())
        return UNKNOWN
