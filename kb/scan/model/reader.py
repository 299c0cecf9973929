"""Reading one scanned file into dataflow: which classes to run, and with what.

The module classes of the file that no other class of the file builds are the roots: each
is built as its checkpoint would build it (constructor arguments from the model
configuration when one is given, a configuration object for a ``config``/``args``
parameter, the class's own defaults otherwise) and its ``forward`` is run on symbolic
inputs.  Everything a root builds and calls is read through it, so a block gets the
arguments its caller passes.  A module class no root reached is then run on its own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from kb.scan.model.calls import Frame
from kb.scan.model.flow import Interp
from kb.scan.model.graph import (
    UNKNOWN,
    ClassRef,
    Const,
    DictVal,
    Func,
    Inst,
    Node,
    Returned,
    Sym,
    simple_name,
)
from kb.scan.model.modelconfig import lookup, raw
from kb.scan.model.resolve import Reach

#: constructor parameters that hold the model's configuration object
CONFIG_PARAMS = frozenset(
    {
        "config",
        "cfg",
        "args",
        "params",
        "model_args",
        "model_config",
        "configs",
        "hparams",
        "opt",
        "opts",
        "conf",
        "arch_config",
        "model_cfg",
    }
)
#: steps one root may take, and all roots of a file together
ROOT_STEPS = 60_000
FILE_STEPS = 400_000
#: module classes read on their own because no root built them (per scanned file)
MAX_UNREACHED = 24
_NUMBER_TYPES = frozenset({"int", "float", "bool", "str"})


@dataclass
class Reading:
    """What reading one file produced."""

    interp: Interp
    roots: list[Inst] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)  # roots whose reading hit the step bound


def _classes(tree: ast.Module) -> list[ast.ClassDef]:
    out: list[ast.ClassDef] = []

    def walk(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                out.append(stmt)
            elif isinstance(stmt, (ast.If, ast.Try)):
                walk(stmt.body)
                walk(stmt.orelse)
                for handler in getattr(stmt, "handlers", []):
                    walk(handler.body)

    walk(tree.body)
    return out


def _built_by_others(classes: list[ast.ClassDef]) -> set[str]:
    """Names of the file's classes another class of the file calls (builds) somewhere."""
    names = {c.name for c in classes}
    out: set[str] = set()
    for c in classes:
        for node in ast.walk(c):
            if isinstance(node, ast.Call):
                name = simple_name(node.func)
                if name in names and name != c.name:
                    out.add(name)
            elif (
                isinstance(node, ast.Name)
                and node.id in names
                and node.id != c.name
                and isinstance(node.ctx, ast.Load)
            ):
                out.add(node.id)  # a class handed on (a factory argument, a processor default)
    return out


class Reader:
    """Runs the roots of one file (see the module doc)."""

    def __init__(
        self,
        tree: ast.Module,
        path: str,
        config: dict[str, Any] | None = None,
        reach: Reach | None = None,
    ) -> None:
        self.tree = tree
        self.reach = reach or Reach(path, tree)
        self.path = self.reach.entry
        self.config = config or {}
        self.interp = Interp(self.reach, self.config, max_steps=ROOT_STEPS)
        self._config_classes: list[ClassRef] | None = None
        self._shared: Inst | None = None
        self.total = 0
        self._named: dict[int, list[ClassRef]] = {}

    def read(self) -> Reading:
        reading = Reading(self.interp)
        classes = _classes(self.tree)
        built = _built_by_others(classes)
        order = [c for c in classes if c.name not in built] + [
            c for c in classes if c.name in built
        ]
        self.total = 0
        for cls in order:
            self.root(ClassRef(cls, self.path), reading)
        for _ in range(MAX_UNREACHED):
            # modules the code builds only on a branch these arguments did not take (a MoE
            # layer when the defaults are dense): read on their own
            todo = [r for r in self.unreached() if not self.built(r)]
            if not todo:
                break
            self.root(todo[0], reading)
        for cls in classes:
            # every module class of the file also on its own, its forward's arguments all
            # given: what it computes when a caller hands it a cache or a mask (a model that
            # builds it may not); facts its callers decide come from their instances
            ref = ClassRef(cls, self.path)
            if self.built(ref) and self.total <= FILE_STEPS and self.interp.is_module(ref):
                self.root(ref, reading, standalone=True)
        return reading

    def root(self, ref: ClassRef, reading: Reading, *, standalone: bool = False) -> None:
        if self.total > FILE_STEPS:
            reading.partial.append(ref.node.name)
            return
        if not self.interp.is_module(ref) or (self.built(ref) and not standalone):
            return
        self.interp.steps = 0
        self.interp.exhausted = False
        inst = self.run_root(ref, standalone)
        self.total += self.interp.steps
        if inst is not None:
            reading.roots.append(inst)
        if self.interp.exhausted:
            reading.partial.append(ref.node.name)

    def built(self, ref: ClassRef) -> bool:
        """Some instance of the class ran its forward (built only on a path no call takes,
        or past the few kinds a loop over a mixed list runs, it is read on its own)."""
        return id(ref.node) in self.interp.ran

    def unreached(self) -> list[ClassRef]:
        """Module classes the built modules' constructors name and no instance came from."""
        out: list[ClassRef] = []
        for inst in list(self.interp.instances):
            if inst.cls is None or not inst.module:
                continue
            for ref in self.named_in_init(inst.cls):
                if all(ref.node is not r.node for r in out):
                    out.append(ref)
        return out

    def named_in_init(self, cls: ClassRef) -> list[ClassRef]:
        key = id(cls.node)
        if key not in self._named:
            found: list[ClassRef] = []
            init = next(
                (
                    n
                    for n in cls.node.body
                    if isinstance(n, ast.FunctionDef) and n.name == "__init__"
                ),
                None,
            )
            for node in ast.walk(init) if init is not None else ():
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    value = self.interp.global_value(cls.file, node.func.id)
                    if isinstance(value, ClassRef) and all(value.node is not r.node for r in found):
                        found.append(value)
            self._named[key] = found
        return self._named[key]

    def run_root(self, cls: ClassRef, standalone: bool = False) -> Inst | None:
        frame = Frame({}, cls.file, None, 0)
        interp = self.interp
        try:
            args = self.constructor_args(cls, standalone)
            inst = interp.instantiate(cls, [], args, frame, cls.node)
            if not isinstance(inst, Inst):
                return None
            inst.standalone = standalone
            own = inst.attrs.get("forward")
            found = interp.lookup_class(cls, "forward") or interp.lookup_class(cls, "__call__")
            fn = own.node if isinstance(own, Func) else found[1] if found is not None else None
            if isinstance(fn, ast.FunctionDef):
                interp.call(inst, [], self.forward_args(fn), Frame({}, cls.file, None, 0), cls.node)
            return inst
        except Returned:
            return next(
                (i for i in interp.instances if i.cls is not None and i.cls.node is cls.node), None
            )
        except RecursionError:
            return None

    def constructor_args(self, cls: ClassRef, standalone: bool = False) -> dict[str, Any]:
        """Keyword arguments building a root as its checkpoint would: hyper-parameters from
        the configuration, else the defaults; a flag (``is_causal=False``) is undecided, the
        caller may set it either way."""
        found = self.interp.lookup_class(cls, "__init__")
        if found is None or not isinstance(found[1], ast.FunctionDef):
            return {}
        fn = found[1]
        a = fn.args
        params = [*a.posonlyargs, *a.args][1:] + list(a.kwonlyargs)
        with_default = {p.arg for p in a.args[len(a.args) - len(a.defaults) :]}
        with_default |= {
            p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=False) if d is not None
        }
        flags = {
            p.arg
            for p, d in zip(
                [*a.args, *a.kwonlyargs],
                [*([None] * (len(a.args) - len(a.defaults))), *a.defaults, *a.kw_defaults],
                strict=False,
            )
            if isinstance(d, ast.Constant) and isinstance(d.value, bool)
        }
        out: dict[str, Any] = {}
        for p in params:
            config = self.config_object(p, found[0])
            if config is not None:
                out[p.arg] = config
                continue
            value = lookup(self.config, p.arg) if self.config else UNKNOWN
            if value is not UNKNOWN:
                out[p.arg] = value
            elif p.arg not in with_default or p.arg in flags:
                out[p.arg] = Sym(p.arg)
        return out

    def config_object(self, param: ast.arg, owner: ClassRef) -> Inst | None:
        """A configuration object for a parameter annotated with a config class or named
        like one: its attributes are the checkpoint's values, else the class's defaults."""
        annotation = param.annotation
        ref = None
        if annotation is not None:
            value = self.interp.ev(_strip_optional(annotation), Frame({}, owner.file, None, 0))
            if isinstance(value, ClassRef):
                ref = value
        if ref is None and param.arg not in CONFIG_PARAMS:
            return None
        if ref is not None and not self.interp.is_config(ref):
            return None
        if ref is None:
            ref = self.config_class(owner)
        if ref is None and self._config_classes:
            return self.shared_config()
        return self.config_inst(ref)

    def shared_config(self) -> Inst:
        """A configuration object when the file imports several config classes (a
        multimodal model's text and vision configs): the defaults they all agree on."""
        if self._shared is None:
            made = [self.config_inst(ref) for ref in self._config_classes or []]
            attrs: dict[str, Any] = {}
            for name in {k for m in made for k in m.attrs}:
                values = {repr(m.attrs[name]): m.attrs[name] for m in made if name in m.attrs}
                only = next(iter(values.values()))
                if len(values) == 1 and isinstance(only, Const):
                    attrs[name] = only
            self._shared = Inst("config", None, attrs=attrs, module=False, config=True)
        return self._shared

    def config_inst(self, ref: ClassRef | None) -> Inst:
        """An instance of a configuration class: the checkpoint's values, else its defaults."""
        inst = Inst(ref.node.name if ref else "config", ref, module=False, config=True)
        if ref is not None:
            kwargs = {}
            init = self.interp.lookup_class(ref, "__init__")
            if init is not None and isinstance(init[1], ast.FunctionDef):
                for arg in init[1].args.args[1:] + init[1].args.kwonlyargs:
                    found = raw(self.config, arg.arg)
                    if found is not UNKNOWN:
                        kwargs[arg.arg] = lookup(self.config, arg.arg)
                try:
                    func = Func(init[1], init[0].file, bound=inst, owner_cls=init[0])
                    self.interp.call_func(func, [], kwargs, Frame({}, ref.file, None, 0), ref.node)
                except Returned:
                    pass
                finally:
                    self.interp.steps = 0
            self.interp.fill_fields(inst, ref, [], {})
            self.sub_configs(inst, ref)
        return inst

    def sub_configs(self, inst: Inst, ref: ClassRef) -> None:
        """A composite configuration's parts left unset (``text_config = None``) are their
        classes' defaults, as the class's table of sub-configurations names them."""
        for table in ("sub_configs_defaults", "sub_configs"):
            found = self.interp.lookup_class(ref, table)
            if found is None:
                continue
            value = self.interp.class_value(found[0], table, found[1])
            for name, part in value.items.items() if isinstance(value, DictVal) else ():
                held = inst.attrs.get(str(name))
                if isinstance(part, ClassRef) and not (isinstance(held, Inst) and held.config):
                    inst.attrs[str(name)] = self.config_inst(part)
            return

    def config_class(self, owner: ClassRef) -> ClassRef | None:
        """The configuration class a model names (``config_class = XConfig`` on it or a base),
        else the one class the file imports from a ``configuration_*`` module."""
        found = self.interp.lookup_class(owner, "config_class")
        if found is not None:
            value = self.interp.class_value(found[0], "config_class", found[1])
            if isinstance(value, ClassRef):
                return value
        if self._config_classes is None:
            self._config_classes = []
            parsed = self.reach.parsed(self.path)
            for name, node in (parsed.names if parsed is not None else {}).items():
                if isinstance(node, ast.ImportFrom) and (node.module or "").rsplit(".", 1)[
                    -1
                ].startswith("configuration"):
                    value = self.interp.global_value(self.path, name)
                    if isinstance(value, ClassRef) and self.interp.is_config(value):
                        self._config_classes.append(value)
        return self._config_classes[0] if len(self._config_classes) == 1 else None

    def forward_args(self, fn: ast.FunctionDef) -> dict[str, Any]:
        """Symbolic inputs of a root's forward: tensors, unless annotated as numbers;
        a literal default stands, a flag is undecided (the caller may pass either)."""
        a = fn.args
        params = [*a.posonlyargs, *a.args][1:]
        defaults = dict(
            zip([p.arg for p in params[len(params) - len(a.defaults) :]], a.defaults, strict=False)
        )
        out: dict[str, Any] = {}
        for p in [*params, *a.kwonlyargs]:
            annotation = ast.unparse(p.annotation) if p.annotation is not None else ""
            default = defaults.get(p.arg)
            if default is None:
                kw = dict(zip([k.arg for k in a.kwonlyargs], a.kw_defaults, strict=False))
                default = kw.get(p.arg)
            literal = default.value if isinstance(default, ast.Constant) else UNKNOWN
            if (
                isinstance(literal, bool)
                or annotation in _NUMBER_TYPES
                or annotation.startswith("Optional[int")
            ):
                out[p.arg] = Sym(p.arg)
            elif default is not None and literal is not UNKNOWN and literal is not None:
                out[p.arg] = Const(literal)
            else:
                out[p.arg] = Node("input", (), {"name": Const(p.arg)}, self.path, fn.lineno, None)
        return out


def _strip_optional(annotation: ast.expr) -> ast.expr:
    """``Optional[X]`` / ``X | None`` / ``"X"`` -> ``X``."""
    if isinstance(annotation, ast.Subscript) and isinstance(
        annotation.value, (ast.Name, ast.Attribute)
    ):
        return _strip_optional(annotation.slice)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _strip_optional(annotation.left)
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            return _strip_optional(ast.parse(annotation.value, mode="eval").body)
        except SyntaxError:
            return annotation
    return annotation


def read_file(tree: ast.Module, path: str, config: dict[str, Any] | None = None) -> Reading:
    return Reader(tree, path, config).read()
