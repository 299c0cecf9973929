"""Calls as the model reader follows them: functions, methods, classes, module instances,
tensor methods and external functions (through the canonical table of
:mod:`kb.scan.model.ops`).

A user function or method is run on its arguments (its defaults read in its own file);
calling a class builds an instance and runs its ``__init__``; calling a module instance
runs its ``forward`` (a processor's ``__call__``); an external ``nn`` class is a leaf whose
call is one node.  A call the reader cannot follow is one opaque node over its tensor
arguments, so the dataflow stays connected.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from typing import Any

from kb.scan.model.frames import (
    Bound,
    Frame,
    SuperRef,
    TensorMethod,
    decorators,
    has_tensors,
    last_name,
)
from kb.scan.model.graph import (
    UNKNOWN,
    Alt,
    ClassRef,
    Const,
    DictVal,
    Ext,
    Func,
    Inst,
    ModuleVal,
    Node,
    Returned,
    Seq,
    Sym,
    merge,
)
from kb.scan.model.installed import installed_classes
from kb.scan.model.libbases import LIBRARY_BASES, LibraryBases

#: base classes that make a class an nn.Module without a forward of its own in reach
_MODULE_BASES = ("Module", "ModelMixin", "PreTrainedModel", "PreTrainedModelMixin", "Model")
#: base classes of the model libraries that hold loading, saving, generation and hub
#: plumbing, never a module's computation: named as bases (a model deriving from them is
#: an nn.Module) but not read - they are the largest files a model imports
PLUMBING_BASES = frozenset(
    {
        "PreTrainedModel",
        "PretrainedModel",
        "GenerationMixin",
        "PushToHubMixin",
        "ModuleUtilsMixin",
        "PeftAdapterMixin",
        "EmbeddingAccessMixin",
        "ModelMixin",
        "ConfigMixin",
        "FromOriginalModelMixin",
        "CacheMixin",
        "PreTrainedConfig",
        "PretrainedConfig",
    }
)
_CONFIG_SUFFIXES = ("Config", "Configuration", "Args", "Arguments", "Params", "Hparams")
#: nn.Module methods a module calls on itself (not in reach: torch is not followed)
_MODULE_API = frozenset(
    {
        "register_buffer",
        "register_parameter",
        "add_module",
        "to",
        "apply",
        "requires_grad_",
        "eval",
        "train",
        "half",
        "float",
        "bfloat16",
        "cuda",
    }
)


def training_only(name: str) -> bool:
    """A function or attribute computing a training loss (never run at inference)."""
    return "loss" in name.lower()


def _defined(cls: ClassRef, name: str) -> ast.AST | None:
    """What the class body binds to ``name``: a method, or the value of an assignment."""
    for stmt in cls.node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            return stmt
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in stmt.targets
        ):
            return stmt.value
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.target.id == name
            and stmt.value is not None
        ):
            return stmt.value
    return None


class Calls(LibraryBases):
    """Call dispatch, instantiation and attribute lookup; mixed into the interpreter."""

    # provided by the interpreter
    reach: Any
    model_config: dict[str, Any]
    instances: list[Inst]
    depth: int
    max_depth: int

    def __init__(self) -> None:
        self._mro: dict[int, list[ClassRef | str]] = {}
        self._active: set[tuple[int, int]] = set()
        self._defaults: dict[int, Any] = {}
        self._class_values: dict[tuple[int, str], Any] = {}

    # -- interface used by the interpreter (defined there) ------------------------------------
    def ev(self, node: Any, frame: Frame) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def node(
        self, op: str, args: tuple[Any, ...], kw: dict[str, Any] | None, frame: Frame, at: Any
    ) -> Node:  # pragma: no cover - overridden
        raise NotImplementedError

    def run_body(self, body: list[ast.stmt], frame: Frame) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def global_value(self, file: str, name: str) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def found_value(self, found: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def set_attr(self, owner: Inst, attr: str, value: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def iterate(self, value: Any) -> list[Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    def item(
        self, value: Any, i: int, frame: Frame, at: Any
    ) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- dispatch -------------------------------------------------------------------------------
    def call(
        self, func: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        if isinstance(func, Func):
            return self.call_func(func, args, kwargs, frame, at)
        if isinstance(func, ClassRef):
            return self.instantiate(func, args, kwargs, frame, at)
        if isinstance(func, Inst):
            return self.call_inst(func, args, kwargs, frame, at)
        if isinstance(func, TensorMethod):
            return self.tensor_method(func, args, kwargs, frame, at)
        if isinstance(func, Ext):
            return self.call_ext(func.dotted, args, kwargs, frame, at)
        if isinstance(func, Bound):
            if func.name == "partial" and isinstance(func.value, Seq):  # kb.scan.model.pybuiltins
                target, pre, kw = func.value.items
                return self.call(target, [*pre.items, *args], {**kw.items, **kwargs}, frame, at)
            return self.call_bound(func, args, kwargs)
        if isinstance(func, Alt):
            return merge(
                [self.call(o, list(args), dict(kwargs), frame, at) for o in func.options[:4]],
                func.why,
            )
        if (
            isinstance(func, Node)
            and func.op == "input"
            and isinstance(func.kw.get("field"), Const)
        ):
            # a method of an argument (past_key_value.update(k, v)): a method node on it
            of = func.kw.get("of")
            return self.node("method", (of, *args), {**kwargs, "name": func.kw["field"]}, frame, at)
        return self.opaque("?", args, kwargs, frame, at)

    def opaque(
        self, callee: str, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        """A call the reader does not follow: one node over its tensors (UNKNOWN without).
        A callee handed ``query``, ``key`` and ``value`` tensors by keyword is an attention
        kernel chosen at run time (a backend registry): SDPA's interface, its flags as given."""
        if all(isinstance(kwargs.get(k), Node) for k in ("query", "key", "value")):
            flags: dict[str, Any] = {
                k: kwargs[k] for k in ("attn_mask", "is_causal", "scale") if k in kwargs
            }
            qkv = (kwargs["query"], kwargs["key"], kwargs["value"])
            return self.node("sdpa", qkv, {**flags, "callee": Const(callee)}, frame, at)
        if has_tensors(args) or has_tensors(kwargs.values()):
            return self.node("call", tuple(args), {**kwargs, "callee": Const(callee)}, frame, at)
        return UNKNOWN

    # -- functions ------------------------------------------------------------------------------
    def call_func(
        self, func: Func, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        key = (id(func.node), id(func.bound))
        if training_only(getattr(func.node, "name", "")):
            return UNKNOWN
        if self.depth >= self.max_depth or key in self._active:
            return self.opaque(getattr(func.node, "name", "lambda"), args, kwargs, frame, at)
        if func.partial is not None:
            args = [*func.partial[0], *args]
            kwargs = {**func.partial[1], **kwargs}
        env = self.bind(func, args, kwargs)
        owner = (
            func.bound if isinstance(func.bound, Inst) and not func.bound.config else frame.owner
        )
        inner = Frame(env, func.file, owner, frame.loop, closure=func.closure)
        if func.owner_cls is not None:
            inner.env.setdefault("__class__", func.owner_cls)
        self._active.add(key)
        self.depth += 1
        try:
            if isinstance(func.node, ast.Lambda):
                return self.ev(func.node.body, inner)

            try:
                self.run_body(func.node.body, inner)
            except Returned as stop:
                if str(stop) == "budget":
                    raise
            if not inner.returns:
                return Const(None)
            return merge(inner.returns)
        finally:
            self.depth -= 1
            self._active.discard(key)

    def bind(self, func: Func, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The parameters of ``func`` bound to the call's arguments (defaults read in the
        function's own file; an argument not given and without default is UNKNOWN)."""
        a = func.node.args
        params = [*a.posonlyargs, *a.args]
        given = list(args)
        if func.bound is not None and params and not isinstance(func.node, ast.Lambda):
            given.insert(0, func.bound)
        env: dict[str, Any] = {}
        defaults = dict(
            zip([p.arg for p in params[len(params) - len(a.defaults) :]], a.defaults, strict=False)
        )
        for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=False):
            if d is not None:
                defaults[p.arg] = d
        for i, p in enumerate(params):
            if i < len(given):
                env[p.arg] = given[i]
            elif p.arg in kwargs:
                env[p.arg] = kwargs.pop(p.arg)
            elif p.arg in defaults:
                env[p.arg] = self.default(func, defaults[p.arg])
                if (
                    isinstance(func.bound, Inst)
                    and func.bound.config
                    and isinstance(env[p.arg], Const)
                ):
                    env[p.arg] = Const(env[p.arg].value, f"{func.bound.name} default")
            else:
                env[p.arg] = UNKNOWN
        if a.vararg is not None:
            env[a.vararg.arg] = Seq(tuple(given[len(params) :]))
        for p in a.kwonlyargs:
            env[p.arg] = (
                kwargs.pop(p.arg)
                if p.arg in kwargs
                else (self.default(func, defaults[p.arg]) if p.arg in defaults else UNKNOWN)
            )
        if a.kwarg is not None:
            env[a.kwarg.arg] = DictVal(dict(kwargs))
        return env

    def default(self, func: Func, node: ast.expr) -> Any:
        key = id(node)
        if key not in self._defaults:
            self._defaults[key] = UNKNOWN
            self._defaults[key] = self.ev(node, Frame({}, func.file, None, 0))
        return self._defaults[key]

    # -- classes --------------------------------------------------------------------------------
    def mro(self, cls: ClassRef) -> tuple[list[ClassRef], list[str]]:
        """The classes in reach a class derives from (itself first) and the external base
        names met on the way (every base resolved: prefer :meth:`walk_mro`)."""
        classes: list[ClassRef] = []
        external: list[str] = []
        for item in self.walk_mro(cls):
            (classes if isinstance(item, ClassRef) else external).append(item)  # type: ignore[arg-type]
        return classes, external

    def walk_mro(self, cls: ClassRef) -> Iterator[ClassRef | str]:
        """The class, then its bases depth first, each resolved only when reached: a question
        answered by the class itself never reads the files its bases live in."""
        seen: set[int] = set()
        todo: list[ClassRef | str] = [cls]
        while todo:
            item = todo.pop(0)
            if isinstance(item, str):
                yield item
                continue
            if id(item.node) in seen:
                continue
            seen.add(id(item.node))
            yield item
            todo = self.bases(item) + todo

    def bases(self, cls: ClassRef) -> list[ClassRef | str]:
        key = id(cls.node)
        if key not in self._mro:
            out: list[ClassRef | str] = []
            self._mro[key] = out
            for base in cls.node.bases:
                if last_name(ast.unparse(base)) in PLUMBING_BASES:
                    out.append(ast.unparse(base))  # named, never read (see PLUMBING_BASES)
                    continue
                value = self.ev(base, Frame({}, cls.file, None, 0))
                if isinstance(value, ClassRef):
                    out.append(value)
                elif isinstance(value, Ext):
                    out.append(self.installed_base(value.dotted) or value.dotted)
                elif isinstance(base, (ast.Name, ast.Attribute)):
                    out.append(ast.unparse(base))
        return self._mro[key]

    def installed_base(self, dotted: str) -> ClassRef | None:
        """A base class read from an installed package (kb.scan.model.sitepackages); None
        for a base read by its documented behaviour (LIBRARY_BASES) or not found."""
        found = None if dotted in LIBRARY_BASES else self.reach.installed_class(dotted)
        return ClassRef(*found) if found is not None else None

    def installed(self, inst: Inst, name: str, frame: Frame, at: Any) -> Inst | None:
        """The module a ``None`` slot holds once the model installs it (kb.scan.model.installed)."""
        assert inst.cls is not None
        parsed = self.reach.parsed(inst.cls.file)
        for cname in (
            installed_classes(parsed, inst.cls.node.name, name) if parsed is not None else ()
        ):
            ref = self.ev(ast.Name(cname, ast.Load()), Frame({}, inst.cls.file, None, 0))
            if isinstance(ref, ClassRef) and ref.node is not inst.cls.node and self.is_module(ref):
                inst.attrs[name] = UNKNOWN  # no second try while it is being built
                made = self.instantiate(ref, [], {}, frame, at)
                inst.attrs[name] = made
                return made
        return None

    def lookup_class(
        self, cls: ClassRef, name: str, after: ClassRef | None = None
    ) -> tuple[ClassRef, ast.AST] | None:
        """Where ``name`` is defined in the class or its bases (after ``after``, for super())."""
        passed = after is None
        for c in self.walk_mro(cls):
            if not isinstance(c, ClassRef):
                continue
            if not passed:
                passed = c.node is after.node  # type: ignore[union-attr]
                continue
            found = _defined(c, name)
            if found is not None:
                return c, found
        return None

    def infrastructure(self, cls: ClassRef) -> bool:
        """A base class of a library's plumbing (a pretrained-model mixin): defined away from
        the scanned file's folder and computing nothing itself (no forward).  Its
        ``__init__`` (configs, hooks, generation settings) is not run."""
        here = os.path.dirname(self.reach.entry)
        return os.path.dirname(cls.file) != here and _defined(cls, "forward") is None

    def is_module(self, cls: ClassRef) -> bool:
        for item in self.walk_mro(cls):
            if isinstance(item, str):
                if last_name(item).endswith(_MODULE_BASES):
                    return True
            elif _defined(item, "forward") is not None and item is cls:
                return True
        return False

    def is_config(self, cls: ClassRef) -> bool:
        if "dataclass" in decorators(cls.node):
            return True
        return any(
            (item.node.name if isinstance(item, ClassRef) else last_name(item)).endswith(
                _CONFIG_SUFFIXES
            )
            for item in self.walk_mro(cls)
        )

    def instantiate(
        self, cls: ClassRef, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        module = self.is_module(cls)
        inst = Inst(
            cls.node.name,
            cls,
            module=module,
            config=not module and self.is_config(cls),
            line=getattr(at, "lineno", 0),
        )
        self.instances.append(inst)
        marks = decorators(cls.node)
        if "dataclass" in marks or any(
            ast.unparse(b).endswith("NamedTuple") for b in cls.node.bases
        ):  # the class's own bases: resolving every base reads the library's plumbing
            self.fill_fields(inst, cls, args, kwargs)
        found = self.lookup_class(cls, "__init__")
        if found is not None and isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            init = Func(found[1], found[0].file, bound=inst, owner_cls=found[0])
            self.call_func(init, args, dict(kwargs), frame, at)
        return inst

    def fill_fields(
        self, inst: Inst, cls: ClassRef, args: list[Any], kwargs: dict[str, Any]
    ) -> None:
        """A dataclass's fields from the call, else their defaults."""
        fields: list[tuple[str, ast.expr | None, ClassRef]] = []
        for c in reversed(self.mro(cls)[0]):
            for stmt in c.node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    fields = [f for f in fields if f[0] != stmt.target.id] + [
                        (stmt.target.id, stmt.value, c)
                    ]
        for i, (name, default, c) in enumerate(fields):
            if i < len(args):
                inst.attrs[name] = args[i]
            elif name in kwargs:
                inst.attrs[name] = kwargs[name]
            elif inst.config and (given := self.config_value(name)) is not UNKNOWN:
                inst.attrs[name] = given  # the checkpoint's value, not the code's default
            elif default is not None:
                value = self.ev(default, Frame({}, c.file, None, 0))
                if inst.config and isinstance(value, Const):
                    value = Const(value.value, f"{c.node.name} default")
                inst.attrs[name] = UNKNOWN if isinstance(value, Node) else value

    # -- instances ------------------------------------------------------------------------------
    def call_inst(
        self, inst: Inst, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any
    ) -> Any:
        if inst.leaf is not None:
            return self.call_leaf(inst, args, kwargs, frame, at)
        if inst.cls is None:
            return self.opaque(inst.name, args, kwargs, frame, at)
        self.ran.add(id(inst.cls.node))
        own = inst.attrs.get("forward")  # self.forward = self.forward_ckpt in __init__
        if isinstance(own, (Func, Alt)):
            return self.call(own, args, kwargs, frame, at)
        for name in ("forward", "__call__") if inst.module else ("__call__", "forward"):
            found = self.lookup_class(inst.cls, name)
            if found is not None and isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                return self.call_func(
                    Func(found[1], found[0].file, bound=inst, owner_cls=found[0]),
                    args,
                    kwargs,
                    frame,
                    at,
                )
        inherited = self.library_forward(inst, args, kwargs, frame, at)
        if inherited is not None:
            return inherited
        return self.opaque(inst.name, args, kwargs, frame, at)

    def getattr(self, obj: Any, name: str, frame: Frame, at: Any) -> Any:
        if isinstance(obj, Inst):
            return self.inst_attr(obj, name, frame, at)
        if isinstance(obj, Node):
            return self.tensor_attr(obj, name, frame, at)
        if isinstance(obj, Ext):
            return Ext(f"{obj.dotted}.{name}")
        if isinstance(obj, ModuleVal):
            if obj.file is None:
                return Ext(f"{obj.dotted}.{name}")
            from kb.scan.model.resolve import ModuleRef

            found = self.reach.member(ModuleRef(obj.dotted, obj.file), name)
            return self.found_value(found) if found is not None else Ext(f"{obj.dotted}.{name}")
        if isinstance(obj, ClassRef):
            return self.class_attr(obj, name, frame)
        if isinstance(obj, SuperRef):
            found = (
                self.lookup_class(obj.cls, name, after=obj.cls)
                if isinstance(obj.inst, Inst) and obj.inst.cls
                else None
            )
            if found is None and name == "__init__" and isinstance(obj.inst, Inst):
                return self.library_init_of(obj.inst) or Ext("builtins.noop")
            if found is None and name == "forward" and isinstance(obj.inst, Inst):
                return self.leaf_forward_of(obj.inst) or Ext("builtins.noop")
            if found is None or (name == "__init__" and self.infrastructure(found[0])):
                return Ext("builtins.noop")
            defining, node = found
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return Func(node, defining.file, bound=obj.inst, owner_cls=defining)
            return self.ev(node, Frame({}, defining.file, None, 0))
        if isinstance(obj, Sym):
            return Sym(f"{obj.name}.{name}", obj.loop)
        if isinstance(obj, Alt):
            return merge([self.getattr(o, name, frame, at) for o in obj.options])
        if isinstance(obj, DictVal) and name in obj.items:  # an nn.ModuleDict's entry
            return obj.items[name]
        if isinstance(obj, (Seq, DictVal, Const)):
            return Bound(obj, name)
        return UNKNOWN

    def inst_attr(self, inst: Inst, name: str, frame: Frame, at: Any) -> Any:
        if name in inst.attrs:
            held = inst.attrs[name]
            if isinstance(held, Const) and held.value is None and inst.cls is not None:
                return self.installed(inst, name, frame, at) or held
            return held
        if name == "training":
            return Const(False)
        if training_only(name):
            return UNKNOWN
        if inst.leaf is not None:
            if name in ("weight", "bias"):
                made = self.node(
                    "param", (), {"name": Const(f"{inst.name}.{name}"), "module": inst}, frame, at
                )
                inst.attrs[name] = made
                return made
            if name in ("forward", "__call__"):
                return inst
            return inst.kwargs.get(name, Sym(f"{inst.name}.{name}"))
        if name in _MODULE_API and inst.module:
            return Bound(inst, name)
        if inst.config:
            value = self.config_value(name)
            if value is not UNKNOWN:
                return value
            if name == "to_dict" and (inst.cls is None or not self.lookup_class(inst.cls, name)):
                return Bound(inst, name)  # the library's: every hyper-parameter as a dict
        if inst.cls is not None:
            found = self.lookup_class(inst.cls, name)
            if found is not None:
                defining, node = found
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    marks = decorators(node)
                    if "staticmethod" in marks:
                        return Func(node, defining.file, owner_cls=defining)
                    func = Func(node, defining.file, bound=inst, owner_cls=defining)
                    if "property" in marks or "cached_property" in marks:
                        return self.call_func(func, [], {}, frame, at)
                    return func
                value = self.class_value(defining, name, node)
                if inst.config and isinstance(value, Const):
                    return Const(value.value, f"{defining.node.name} default")
                return value
        if name in ("weight", "bias") and inst.module and self.leaf_forward_of(inst) is not None:
            # a subclass of an nn layer (``class Proj(nn.Linear)`` with its own forward):
            # the layer's parameters, made by the library's constructor the reader skips
            made = self.node("param", (), {"name": Const(f"{inst.name}.{name}")}, frame, at)
            inst.attrs[name] = made
            return made
        return Sym(f"{'config' if inst.config else inst.name}.{name}")

    def class_value(self, cls: ClassRef, name: str, node: ast.AST) -> Any:
        key = (id(cls.node), name)
        if key not in self._class_values:
            self._class_values[key] = UNKNOWN
            self._class_values[key] = self.ev(node, Frame({}, cls.file, None, 0))
        return self._class_values[key]

    def class_attr(self, cls: ClassRef, name: str, frame: Frame) -> Any:
        found = self.lookup_class(cls, name)
        if found is None:
            if name == "apply":  # torch.autograd.Function: apply runs the static forward
                fwd = self.lookup_class(cls, "forward")
                if fwd is not None and isinstance(fwd[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                    return Func(fwd[1], fwd[0].file, owner_cls=fwd[0], partial=((Const(None),), {}))
            return UNKNOWN
        defining, node = found
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound = cls if "classmethod" in decorators(node) else None
            return Func(node, defining.file, bound=bound, owner_cls=defining)
        return self.class_value(defining, name, node)

    def config_value(self, name: str) -> Any:
        """A hyper-parameter from the checkpoint's configuration (UNKNOWN: not there)."""
        from kb.scan.model.modelconfig import lookup

        return lookup(self.model_config, name)
