"""Base classes and functions of public libraries whose code is not in reach: what their
constructor builds, what their forward computes, what a fused library call writes, read
from the library's documented behaviour instead of its source.

xformers' ``rope_padded(xq, xk, xv, cache_k, cache_v, attn_bias, ...)`` rotates the
queries and keys (neighbouring pairs unless ``adjacents=False``), writes the rotated keys
and the values into the caches it is handed, and returns the rotated queries;
flash-attn's ``apply_rotary_emb(x, cos, sin, interleaved=False)`` rotates halves, or
neighbouring pairs when ``interleaved``.

diffusers' ``Attention`` is the one research code derives from most (a video DiT
subclasses it to hand in its own attention processor): its constructor makes the
projections ``to_q``, ``to_k``, ``to_v`` and ``to_out`` (a projection, then dropout) and
keeps ``processor``; its forward hands itself, the hidden states, the encoder states and
the mask to that processor; without one, the default processor computes
scaled-dot-product attention over every key.
"""

from __future__ import annotations

from typing import Any

from kb.scan.model.externals import Externals
from kb.scan.model.frames import Bound, Frame
from kb.scan.model.graph import UNKNOWN, ClassRef, Const, DictVal, Func, Inst, Node, Seq
from kb.scan.model.ops import LIBRARY_CONVENTIONS, leaf_op

#: external base classes (dotted, as imported) -> the convention they follow
LIBRARY_BASES: dict[str, str] = {
    "diffusers.models.attention_processor.Attention": "diffusers_attention",
    "diffusers.models.attention.Attention": "diffusers_attention",
}
#: the optional parts of a diffusers Attention that processors test against None
_ABSENT_PARTS = ("spatial_norm", "group_norm", "norm_cross", "norm_added_q", "norm_added_k")
#: helper methods processors call on it, by what they hand back
_HELPERS = ("prepare_attention_mask", "head_to_batch_dim", "batch_to_head_dim")
_INIT = "__library_init__"
#: diffusers' FeedForward ``activation_fn`` -> (its activation module, GELU's approximation)
_FF_BLOCKS: dict[str, tuple[str, str]] = {
    "gelu": ("GELU", "none"),
    "gelu-approximate": ("GELU", "tanh"),
    "geglu": ("GEGLU", ""),
    "geglu-approximate": ("ApproximateGELU", ""),
    "swiglu": ("SwiGLU", ""),
    "linear-silu": ("LinearActivation", ""),
}
_LEAF = "__leaf_forward__"


class LibraryBases(Externals):
    """Construction and forward of instances whose class derives from a library base."""

    def walk_mro(self, cls: ClassRef) -> Any:  # pragma: no cover
        raise NotImplementedError

    def library_base(self, cls: ClassRef | None) -> str | None:
        """The convention of the first library base the class derives from, if any."""
        if cls is None:
            return None
        for item in self.walk_mro(cls):
            if isinstance(item, str) and item in LIBRARY_BASES:
                return LIBRARY_BASES[item]
        return None

    def leaf_forward_of(self, inst: Inst) -> Bound | None:
        """``super().forward`` reaching an external ``nn`` layer (a router deriving from
        ``nn.Linear``): that layer's computation on the instance's own weights."""
        if inst.cls is None:
            return None
        for item in self.walk_mro(inst.cls):
            if isinstance(item, str):
                op = leaf_op(item)
                if op in LIBRARY_CONVENTIONS:
                    continue  # a convention's base, read by library_forward
                if op is not None and not op.startswith(("opaque", "same", "sequential")):
                    return Bound(inst, f"{_LEAF}:{op}")
        return None

    def library_init_of(self, inst: Inst) -> Bound | None:
        """``super().__init__`` reaching a library base: its constructor, as a bound call."""
        kind = self.library_base(inst.cls)
        return Bound(inst, f"{_INIT}:{kind}") if kind else None

    def library_function(
        self, dotted: str, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        """A library function read by its documented behaviour (None: not one)."""
        if dotted.startswith("flash_attn") and dotted.endswith(
            (".apply_rotary_emb", ".apply_rotary_emb_func")
        ):
            x = args[0] if args else kwargs.get("x")
            if not isinstance(x, Node):
                return None
            interleaved = kwargs.get("interleaved", args[3] if len(args) > 3 else Const(False))
            if not isinstance(interleaved, Const):
                return None  # decided at run time: the pairing is not known
            layout = Const("interleave" if interleaved.value else "half")
            return self.node(
                "rope_kernel", (x,), {"layout": layout, "fn": Const(dotted)}, frame, at
            )
        if dotted.startswith("diffusers") and dotted.endswith(".apply_rotary_emb"):
            return self._diffusers_rotary(args, kwargs, dotted, frame, at)
        if not (dotted.startswith("xformers") and dotted.endswith(".rope_padded")):
            return None
        names = ("xq", "xk", "xv", "cache_k", "cache_v", "attn_bias")
        given = {**dict(zip(names, args, strict=False)), **kwargs}
        xq, xk, xv = (given.get(n) for n in ("xq", "xk", "xv"))
        if not all(isinstance(t, Node) for t in (xq, xk, xv)):
            return None
        adjacents = given.get("adjacents", Const(True))
        layout = Const(
            "half" if isinstance(adjacents, Const) and adjacents.value is False else "interleave"
        )
        rq, rk = (
            self.node("rope_kernel", (t,), {"layout": layout, "fn": Const(dotted)}, frame, at)
            for t in (xq, xk)
        )
        for cache, new in (("cache_k", rk), ("cache_v", xv)):
            held = given.get(cache)
            if isinstance(held, Node):
                written = self.node("index_copy", (held, new), {"inplace": Const(True)}, frame, at)
                for name, value in list(frame.env.items()):  # the caller's names see the write
                    if value is held:
                        frame.env[name] = written
        return rq

    def _config_dict(self, inst: Inst) -> DictVal:
        """transformers' ``PretrainedConfig.to_dict()``: the configuration's attributes (the
        checkpoint's values where it gives them) as a dict, e.g. for ``Block(**cfg.to_dict())``."""
        from kb.scan.model.modelconfig import value_of

        items = {k: v for k, v in inst.attrs.items() if not isinstance(v, (Bound, Func))}
        if inst.cls is not None:  # the model's own configuration: the checkpoint's keys too
            for key, data in self.model_config.items():
                items.setdefault(str(key), value_of(data))
        return DictVal(items)

    def _diffusers_rotary(
        self, args: list[Any], kwargs: dict[str, Any], dotted: str, frame: Frame, at: Any
    ) -> Any:
        """diffusers' ``apply_rotary_emb(x, freqs_cis, use_real=True,
        use_real_unbind_dim=-1)``: real cos/sin unbound on the last axis rotate neighbouring
        pairs, on the second-last axis the two halves; complex frequencies multiply
        neighbouring pairs."""
        x = args[0] if args else kwargs.get("x")
        if not isinstance(x, Node):
            return None
        real = kwargs.get("use_real", args[2] if len(args) > 2 else Const(True))
        axis = kwargs.get("use_real_unbind_dim", args[3] if len(args) > 3 else Const(-1))
        if not isinstance(real, Const) or (real.value and not isinstance(axis, Const)):
            return None  # decided at run time: the pairing is not known
        pairs = "half" if real.value and axis.value == -2 else "interleave"
        return self.node(
            "rope_kernel", (x,), {"layout": Const(pairs), "fn": Const(dotted)}, frame, at
        )

    def call_bound(self, b: Bound, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A constructor or helper method of a library base, else the other bound calls."""
        inst, name = b.value, b.name
        if isinstance(inst, Inst) and name.startswith(_LEAF):
            x = args[0] if args else UNKNOWN
            if not isinstance(x, Node):
                return UNKNOWN
            op = name.split(":", 1)[1]
            here = Frame({}, x.file, inst, x.loop)
            return self.node(op, (x, *args[1:]), {"module": inst}, here, x.line)
        if isinstance(inst, Inst) and name.startswith(_INIT):
            self._diffusers_attention_init(inst, args, kwargs, None)
            return Const(None)
        if isinstance(inst, Inst) and inst.config and name == "to_dict":
            return self._config_dict(inst)
        if isinstance(inst, Inst) and name in _HELPERS and self._convention(inst):
            return args[0] if args else UNKNOWN
        return super().call_bound(b, args, kwargs)

    def _convention(self, inst: Inst) -> str | None:
        """The library convention an instance follows: built in place, or by derivation."""
        if inst.leaf in LIBRARY_CONVENTIONS:
            return inst.leaf
        return self.library_base(inst.cls)

    def library_init(
        self, inst: Inst, kind: str, args: list[Any], kwargs: dict[str, Any], at: Any
    ) -> None:
        """A library module built in place: the parts its constructor makes."""
        if kind == "diffusers_attention":
            self._diffusers_attention_init(inst, args, kwargs, at)

    def _spelling(self, inst: Inst, name: str, position: int, default: Any) -> Any:
        return inst.kwargs.get(name, inst.kwargs.get(f"arg{position}", Const(default)))

    def _diffusers_feed_forward(self, inst: Inst, x: Node, frame: Frame, at: Any) -> Any:
        """diffusers' FeedForward: the activation block ``activation_fn`` names (a projection
        and its activation), dropout, then the output projection."""
        spelling = self._spelling(inst, "activation_fn", 4, "geglu")
        value = spelling.value if isinstance(spelling, Const) else None
        block = _FF_BLOCKS.get(value) if isinstance(value, str) else None
        if block is None:  # not a spelling the library knows, or decided at run time
            h = self.node("linear", (x,), {"module": inst}, frame, at)
            h = self.call(self.activation_leaf(spelling, at), [h], {}, frame, at)
        else:
            h = self._diffusers_activation(inst, block[0], x, frame, at, block[1])
        return self.node("linear", (h,), {"module": inst}, frame, at)

    def _diffusers_activation(
        self, inst: Inst, cls: str, x: Node, frame: Frame, at: Any, approximate: str = ""
    ) -> Any:
        """diffusers' activation modules, each a projection then its activation: GELU (erf
        or tanh), GEGLU and SwiGLU (the second half of the projection activated and
        multiplying the first), ApproximateGELU (x * sigmoid(1.702 x)), LinearActivation."""
        proj = self.node("linear", (x,), {"module": inst}, frame, at)
        if cls == "GELU":
            spelled = approximate or self._spelling(inst, "approximate", 2, "none").value
            kw = {"approximate": Const(spelled)} if spelled == "tanh" else {}
            return self.call_ext("torch.nn.functional.gelu", [proj], kw, frame, at)
        if cls in ("GEGLU", "SwiGLU"):
            halves = self.call_ext("torch.chunk", [proj, Const(2)], {"dim": Const(-1)}, frame, at)
            first, gate = (self.item(halves, i, frame, at) for i in (0, 1))
            fn = "torch.nn.functional.gelu" if cls == "GEGLU" else "torch.nn.functional.silu"
            return self.node(
                "mul", (first, self.call_ext(fn, [gate], {}, frame, at)), None, frame, at
            )
        if cls == "ApproximateGELU":
            scaled = self.node("mul", (proj, Const(1.702)), None, frame, at)
            gate = self.call_ext("torch.sigmoid", [scaled], {}, frame, at)
            return self.node("mul", (proj, gate), None, frame, at)
        spelling = self._spelling(inst, "activation", 3, "silu")
        return self.call(self.activation_leaf(spelling, at), [proj], {}, frame, at)

    def _diffusers_adaln(
        self, inst: Inst, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        """diffusers' adaptive norms: the conditioning through SiLU and a projection, split
        into shift/scale/gate rows, and the norm (LayerNorm without affine, or the RMSNorm
        AdaLayerNormContinuous may name) scaled by one plus scale, shifted. Zero returns
        (x, gate_msa, shift_mlp, scale_mlp, gate_mlp), ZeroSingle (x, gate), Continuous x."""
        x = args[0] if args else kwargs.get("x", UNKNOWN)
        given = [kwargs.get("emb"), kwargs.get("conditioning_embedding"), *args[1:]]
        given += [kwargs.get("timestep")]
        cond = next((c for c in given if isinstance(c, Node)), None)
        if not isinstance(x, Node) or cond is None:
            return UNKNOWN
        name = inst.name
        rows = {"AdaLayerNormZero": 6, "AdaLayerNormZeroSingle": 3}.get(name, 2)
        act = self.call_ext("torch.nn.functional.silu", [cond], {}, frame, at)
        emb = self.node("linear", (act,), {"module": inst}, frame, at)
        parts = self.call_ext("torch.chunk", [emb, Const(rows)], {"dim": Const(1)}, frame, at)
        row = [self.item(parts, i, frame, at) for i in range(rows)]
        if name == "AdaLayerNormContinuous":
            scale, shift = row
            spelled = self._spelling(inst, "norm_type", 5, "layer_norm")
            rms = isinstance(spelled, Const) and spelled.value == "rms_norm"
        else:
            shift, scale = row[0], row[1]
            rms = False
        norm = self.leaf(
            "RMSNorm" if rms else "LayerNorm",
            "rms_norm" if rms else "layer_norm",
            [],
            {"elementwise_affine": self._spelling(inst, "elementwise_affine", 2, True)}
            if name == "AdaLayerNormContinuous"
            else {"elementwise_affine": Const(False)},
            at,
        )
        normed = self.call(norm, [x], {}, frame, at)
        widened = self.node("add", (Const(1), scale), None, frame, at)
        out = self.node(
            "add", (self.node("mul", (normed, widened), None, frame, at), shift), None, frame, at
        )
        if name == "AdaLayerNormZero":
            return Seq((out, row[2], row[3], row[4], row[5]))
        if name == "AdaLayerNormZeroSingle":
            return Seq((out, row[2]))
        return out

    def _diffusers_attention_init(
        self, inst: Inst, args: list[Any], kwargs: dict[str, Any], at: Any
    ) -> None:
        for name in ("to_q", "to_k", "to_v"):
            self.set_attr(inst, name, self.leaf("Linear", "linear", [], {}, at))
        out = self.leaf("Linear", "linear", [], {}, at)
        self.set_attr(inst, "to_out", Seq((out, self.leaf("Dropout", "same", [], {}, at)), "list"))
        self.set_attr(inst, "heads", kwargs.get("heads", Const(8)))
        self.set_attr(
            inst, "rescale_output_factor", kwargs.get("rescale_output_factor", Const(1.0))
        )
        self.set_attr(inst, "residual_connection", kwargs.get("residual_connection", Const(False)))
        norm = kwargs.get("qk_norm", Const(None))
        spelled = str(norm.value) if isinstance(norm, Const) else ""
        for name in ("norm_q", "norm_k"):
            op = spelled if spelled in ("layer_norm", "rms_norm") else None
            self.set_attr(inst, name, self.leaf(name, op, [], {}, at) if op else Const(None))
        for name in _ABSENT_PARTS:
            self.set_attr(inst, name, Const(None))
        processor = kwargs.get("processor", Const(None))
        if not (isinstance(processor, Const) and processor.value is None):
            self.set_attr(inst, "processor", processor)
        for name in _HELPERS:
            self.set_attr(inst, name, Bound(inst, name))

    def library_forward(
        self, inst: Inst, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        """The forward of an instance whose class has none in reach but a library base, or
        of a library module built in place (None: neither)."""
        kind = self._convention(inst)
        if kind in ("diffusers_ff", "diffusers_act"):
            x = args[0] if args else kwargs.get("hidden_states", UNKNOWN)
            if not isinstance(x, Node):
                return UNKNOWN
            if kind == "diffusers_act":
                return self._diffusers_activation(inst, inst.name, x, frame, at)
            return self._diffusers_feed_forward(inst, x, frame, at)
        if kind == "diffusers_adaln":
            return self._diffusers_adaln(inst, args, kwargs, frame, at)
        if kind != "diffusers_attention":
            return None
        names = ("hidden_states", "encoder_hidden_states", "attention_mask")
        given = dict(zip(names, args, strict=False))
        rest = {k: v for k, v in kwargs.items() if k not in names}
        hidden = given.get("hidden_states", kwargs.get("hidden_states", UNKNOWN))
        encoder = given.get(
            "encoder_hidden_states", kwargs.get("encoder_hidden_states", Const(None))
        )
        mask = given.get("attention_mask", kwargs.get("attention_mask", Const(None)))
        processor = inst.attrs.get("processor")
        if processor is not None and processor is not UNKNOWN:
            call = {"encoder_hidden_states": encoder, "attention_mask": mask, **rest}
            return self.call(processor, [inst, hidden], call, frame, at)
        if not isinstance(hidden, Node):
            return UNKNOWN
        context = encoder if isinstance(encoder, Node) else hidden
        q, k, v = (
            self.call(inst.attrs[p], [x], {}, frame, at)
            for p, x in (("to_q", hidden), ("to_k", context), ("to_v", context))
        )
        out = self.node(
            "sdpa", (q, k, v), {"attn_mask": mask, "is_causal": Const(False)}, frame, at
        )
        proj = inst.attrs["to_out"]
        return self.call(proj.items[0], [out], {}, frame, at) if isinstance(proj, Seq) else out
