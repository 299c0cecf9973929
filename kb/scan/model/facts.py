"""What one ``nn.Module`` class builds and computes, read from its AST.

``__init__`` gives the parts (``self.q_proj = nn.Linear(...)``: attribute -> constructor,
``nn.Parameter`` ranks, config fields read); ``forward`` (or ``__call__`` for diffusers
processors) gives the computation: every call reached through the body, its own
methods and the file's helper functions, with line order kept so that "top-k, then
sigmoid" differs from "sigmoid, then top-k".  Code that only runs in training (an
``if self.training`` branch, a ``*loss*`` helper, dropout) is not followed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from kb.scan.fnindex import dotted as _dotted

#: How deep helper calls are followed (forward -> helper -> helper's helper).
DEPTH = 4


def dotted(node: ast.AST) -> str:
    """``torch.nn.functional.silu`` for an attribute chain; ``x()`` marks a call on the
    way, ``x[]`` an index (the scanner's own reading, with indexes kept)."""
    return _dotted(node, subscripts=True)


def last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


@dataclass
class ClassFacts:
    """One class as a porting engineer reads it (no AST kept)."""

    name: str
    line: int
    end_line: int
    bases: list[str]
    attrs: dict[str, str] = field(default_factory=dict)  # self.x = Ctor(...) -> "Ctor"
    attr_kwargs: dict[str, dict[str, object]] = field(default_factory=dict)  # literal kwargs
    attr_strings: dict[str, list[str]] = field(default_factory=dict)  # string literals in the ctor
    params: dict[str, int] = field(default_factory=dict)  # nn.Parameter / Buffer -> rank
    config: set[str] = field(default_factory=set)  # config.X read in the class
    calls: list[tuple[int, str]] = field(default_factory=list)  # (order, callee) in forward
    self_used: set[str] = field(default_factory=set)  # self.X read in forward
    self_called: list[str] = field(default_factory=list)  # self.X(...) called in forward
    shapes: set[str] = field(default_factory=set)  # small computation shapes seen in forward
    strings: set[str] = field(default_factory=set)  # string constants in forward
    class_strings: dict[str, str] = field(default_factory=dict)  # X = "..."/Name at class level
    added: set[str] = field(default_factory=set)  # self.X used as an operand of +
    processors: dict[str, str] = field(default_factory=dict)  # attr -> processor class passed to it
    elements: dict[str, str] = field(default_factory=dict)  # ModuleList attr -> element class
    init_defaults: dict[str, object] = field(default_factory=dict)  # __init__ keyword defaults
    init_values: dict[str, object] = field(default_factory=dict)  # self.X = literal | "arg:NAME"
    config_class: str = ""  # the annotation of __init__'s config argument
    has_forward: bool = False
    skipped_training: int = 0  # training-only branches not followed

    def init_value(self, attr: str) -> object:
        """What ``__init__`` (or the class body) sets ``self.attr`` to: a literal, the
        default of the argument it copies, or None when neither is known."""
        value = self.init_values.get(attr)
        if isinstance(value, str) and value.startswith("arg:"):
            return self.init_defaults.get(value[4:])
        return value

    def called(self, *names: str) -> bool:
        return any(n in names for _, n in self.calls)

    def first(self, *names: str) -> int | None:
        """Order of the first call of one of ``names`` (None: not called)."""
        found = [i for i, n in self.calls if n in names]
        return min(found) if found else None


def _tensor_term(node: ast.AST) -> bool:
    """A name, attribute or call, possibly scaled by one (``residual * self.alpha``)."""
    plain = (ast.Name, ast.Attribute, ast.Call)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return (
            isinstance(node.left, plain) and isinstance(node.right, (*plain, ast.Constant))
        ) or (isinstance(node.right, plain) and isinstance(node.left, ast.Constant))
    return isinstance(node, plain)


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _rank(call: ast.Call) -> int:
    """Rank of ``nn.Parameter(torch.empty(a, b, c))``-like constructions (0: unknown)."""
    inner = call.args[0] if call.args else None
    if isinstance(inner, ast.Call):
        args = inner.args
        if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
            return len(args[0].elts)
        if last(dotted(inner.func)) in ("empty", "zeros", "ones", "randn", "rand", "full"):
            return len([a for a in args if not isinstance(a, ast.Starred)])
    return 0


def _one_plus(node: ast.AST) -> bool:
    """``(1 + scale)``, also indexed or unsqueezed: ``(1 + scale)[:, None]``, ``(1 + s).unsqueeze(1)``."""
    while isinstance(node, (ast.Subscript, ast.Call, ast.Attribute)):
        node = node.value if isinstance(node, (ast.Subscript, ast.Attribute)) else node.func
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Add)
        and any(_literal(s) in (1, 1.0) for s in (node.left, node.right))
    )


def _training_test(test: ast.AST) -> bool:
    text = dotted(test) if not isinstance(test, ast.UnaryOp) else ""
    return text.endswith(".training") or text == "training"


def _is_loss(name: str) -> bool:
    return "loss" in name.lower()


class _Reader:
    """Walks forward and the helpers it reaches, collecting calls in order."""

    def __init__(
        self,
        facts: ClassFacts,
        methods: dict[str, ast.FunctionDef],
        helpers: dict[str, ast.FunctionDef],
    ) -> None:
        self.facts = facts
        self.methods = methods
        self.helpers = helpers
        self.seen: set[int] = set()
        self.order = 0

    def function(self, fn: ast.AST, depth: int) -> None:
        if id(fn) in self.seen or depth > DEPTH:
            return
        self.seen.add(id(fn))
        for stmt in getattr(fn, "body", []):
            self.node(stmt, depth)

    def node(self, node: ast.AST, depth: int) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.helpers = {**self.helpers, node.name: node}  # type: ignore[dict-item]  # a local helper
            return
        if isinstance(node, (ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, ast.If) and _training_test(node.test):
            self.facts.skipped_training += 1
            for stmt in node.orelse:
                self.node(stmt, depth)
            return
        if isinstance(node, ast.Call):
            self.call(node, depth)
            _config_read(node, self.facts.config)
        elif isinstance(node, ast.BinOp):
            self.binop(node)
        elif (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and not isinstance(node.operand, ast.Constant)
        ):
            self.facts.shapes.add("negate")
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                self.facts.self_used.add(node.attr)
            else:
                _config_read(node, self.facts.config)
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 60
        ):
            self.facts.strings.add(node.value)
        elif isinstance(node, ast.Subscript):
            self.subscript(node)
            _config_read(node, self.facts.config)
        elif isinstance(node, ast.Assign) and any(_is_loss(dotted(t)) for t in node.targets):
            self.facts.skipped_training += 1  # aux_loss = ...: training-only
            return
        elif (
            isinstance(node, ast.Name)
            and node.id in self.helpers
            and isinstance(node.ctx, ast.Load)
            and not _is_loss(node.id)
        ):
            # a helper handed on (eager_attention_forward)
            self.facts.calls.append((self.order, node.id))
            self.function(self.helpers[node.id], depth + 1)
        for child in ast.iter_child_nodes(node):
            self.node(child, depth)

    def call(self, node: ast.Call, depth: int) -> None:
        name = dotted(node.func)
        short = last(name)
        if _is_loss(short) or short in ("dropout", "Dropout"):
            self.facts.skipped_training += 1
            return
        self.order += 1
        if short == "update" and ("cache" in name.lower() or "key_value" in name.lower()):
            short = "cache_update"  # past_key_values.update(k, v, layer_idx)
        self.facts.calls.append((self.order, short))
        if short in ("unflatten", "reshape", "view") and node.args:
            shape = node.args[-1]
            if isinstance(shape, ast.Tuple) and _literal(shape.elts[-1]) == 2:
                self.facts.shapes.add("pairs_last")
            if (
                len(node.args) >= 2
                and _literal(node.args[-1]) == 2
                and _literal(node.args[-2]) == -1
            ):
                self.facts.shapes.add("pairs_last")
        if short == "unbind" and (_literal(node.args[0]) if node.args else None) == -1:
            self.facts.shapes.add("unbind_last")
        for kw in node.keywords:
            if kw.arg == "approximate" and _literal(kw.value) == "tanh":
                self.facts.strings.add("tanh")
            if kw.arg:
                value = _literal(kw.value)
                if isinstance(value, (str, int, bool)):
                    self.facts.strings.add(f"{kw.arg}={value}")
        if name.startswith("self.") and name.count(".") == 1:
            self.facts.self_called.append(short)
            method = self.methods.get(short)
            if method is not None:
                self.function(method, depth + 1)
        elif "." not in name and name in self.helpers:
            self.function(self.helpers[name], depth + 1)

    def binop(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Add):
            for side in (node.left, node.right):
                name = dotted(side)
                if name.startswith("self."):  # self.bias, self.bias.squeeze(), self.bias[None]
                    self.facts.added.add(name[5:].split(".")[0].rstrip("[]()"))
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(node.op, ast.Add) and _literal(side) in (1, 1.0):
                target = dotted(other)
                self.facts.shapes.add("one_plus_weight" if "weight" in target else "one_plus_x")
        if isinstance(node.op, ast.Sub) and all(
            isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mult) for x in (node.left, node.right)
        ):
            self.facts.shapes.add("mult_sub")  # x1 * cos - x2 * sin
        if (
            isinstance(node.op, ast.Sub)
            and isinstance(node.right, ast.Call)
            and last(dotted(node.right.func)) == "mean"
        ):
            self.facts.shapes.add("mean_subtract")
        if isinstance(node.op, ast.Add) and all(_tensor_term(s) for s in (node.left, node.right)):
            self.facts.shapes.add("residual_add")  # h + r, or scaled: r * alpha + h * beta
        if isinstance(node.op, ast.Pow) and _literal(node.right) == 2:
            self.facts.shapes.add("square")
        if isinstance(node.op, ast.Mult) and any(
            _one_plus(side) for side in (node.left, node.right)
        ):
            self.facts.shapes.add("times_one_plus")  # norm(x) * (1 + scale)[:, None] + shift

    def subscript(self, node: ast.Subscript) -> None:
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        for e in elts:
            if isinstance(e, ast.Slice) and e.step is not None and _literal(e.step) == 2:
                self.facts.shapes.add("stride_two")
            bound = (
                e.upper
                if isinstance(e, ast.Slice) and e.upper is not None
                else (e.lower if isinstance(e, ast.Slice) else None)
            )
            if (
                isinstance(bound, ast.BinOp)
                and isinstance(bound.op, ast.FloorDiv)
                and _literal(bound.right) == 2
            ):
                self.facts.shapes.add("half_slice")
        base = dotted(node.value)
        if base.startswith("self.") and isinstance(node.ctx, ast.Load):
            self.facts.self_used.add(last(base))


def _constructor(value: ast.AST) -> tuple[str, ast.Call | None]:
    if isinstance(value, ast.Call):
        return last(dotted(value.func)), value
    if isinstance(value, ast.Subscript):  # ACT2FN[config.hidden_act]
        return last(dotted(value.value)), None
    if isinstance(value, ast.IfExp):
        left, call = _constructor(value.body)
        right, rcall = _constructor(value.orelse)
        return (left or right), (call or rcall)
    return "", None


def _names_config(node: ast.AST) -> bool:
    """``config`` or ``self.config`` (cheap: no dotted name built)."""
    if isinstance(node, ast.Name):
        return node.id == "config"
    return isinstance(node, ast.Attribute) and node.attr == "config"


def _config_read(sub: ast.AST, out: set[str]) -> None:
    """``config.X``, ``getattr(config, "X")`` and ``config.rope_parameters["X"]`` in one node."""
    if isinstance(sub, ast.Attribute):
        if _names_config(sub.value):
            out.add(sub.attr)
    elif isinstance(sub, ast.Call):
        if (
            isinstance(sub.func, ast.Name)
            and sub.func.id == "getattr"
            and len(sub.args) >= 2
            and _names_config(sub.args[0])
        ):
            key = _literal(sub.args[1])
            if isinstance(key, str):
                out.add(key)
    elif (
        isinstance(sub, ast.Subscript)
        and isinstance(sub.value, ast.Attribute)
        and sub.value.attr.endswith("rope_parameters")
    ):
        key = _literal(sub.slice)
        if isinstance(key, str):
            out.add(f"rope_parameters.{key}")


def _init(facts: ClassFacts, init: ast.FunctionDef) -> None:
    for sub in ast.walk(init):
        _config_read(sub, facts.config)
        targets: list[ast.AST] = []
        value: ast.AST | None = None
        if isinstance(sub, ast.Assign):
            targets, value = list(sub.targets), sub.value
        elif isinstance(sub, ast.AnnAssign) and sub.value is not None:
            targets, value = [sub.target], sub.value
        for t in targets:
            if not (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "self"
            ):
                continue
            ctor, call = _constructor(value) if value is not None else ("", None)
            if ctor in ("Parameter", "Buffer") and call is not None:
                facts.params[t.attr] = _rank(call)
            if ctor and (t.attr not in facts.attrs or facts.attrs[t.attr] in ("Identity", "None")):
                facts.attrs[t.attr] = ctor
            if call is not None and ctor == "ModuleList":  # ModuleList([Expert(...) for _ in ...])
                inner = next(
                    (c for c in ast.walk(call) if isinstance(c, ast.Call) and c is not call), None
                )
                if inner is not None:
                    facts.elements[t.attr] = last(dotted(inner.func))
            if call is not None:
                for k in call.keywords:
                    if k.arg == "processor" and isinstance(k.value, ast.Call):
                        facts.processors[t.attr] = last(dotted(k.value.func))
                kw = {k.arg: _literal(k.value) for k in call.keywords if k.arg}
                facts.attr_kwargs.setdefault(t.attr, {}).update(
                    {k: v for k, v in kw.items() if v is not None}
                )
                strings = [
                    c.value
                    for c in ast.walk(call)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                ]
                if strings:
                    facts.attr_strings.setdefault(t.attr, []).extend(strings)
            if isinstance(value, ast.Constant) and isinstance(value.value, (bool, int, str)):
                facts.init_values.setdefault(t.attr, value.value)
            elif isinstance(value, ast.Name):  # self.is_causal = is_causal: the argument's default
                facts.init_values.setdefault(t.attr, "arg:" + value.id)
            if isinstance(value, ast.Subscript):  # ACT2FN["gelu"] or ACT2FN[config.hidden_act]
                key = _literal(value.slice)
                if isinstance(key, str):
                    facts.attr_strings.setdefault(t.attr, []).append(key)
                else:
                    facts.attr_strings.setdefault(t.attr, []).append(
                        "config:" + dotted(value.slice).split(".")[-1]
                    )
            if (
                value is not None
                and isinstance(value, ast.Call)
                and last(dotted(value.func)) == "get_activation"
            ):
                key = _literal(value.args[0]) if value.args else None
                if isinstance(key, str):
                    facts.attr_strings.setdefault(t.attr, []).append(key)


def read_class(node: ast.ClassDef, helpers: dict[str, ast.FunctionDef]) -> ClassFacts:
    """The facts of one class; ``helpers`` are the file's top-level functions."""
    facts = ClassFacts(
        node.name, node.lineno, node.end_lineno or node.lineno, [dotted(b) for b in node.bases]
    )
    methods = {
        n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for stmt in node.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            v = stmt.value
            if isinstance(v, ast.Constant) and isinstance(v.value, bool):
                facts.init_values.setdefault(stmt.targets[0].id, v.value)  # is_causal = False
            text = (
                v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else dotted(v)
            )
            if text:
                facts.class_strings[stmt.targets[0].id] = text
    init = methods.get("__init__")
    if init is not None:
        _init(facts, init)  # type: ignore[arg-type]
        args = init.args
        for arg in args.args:
            if arg.arg == "config" and arg.annotation is not None:
                facts.config_class = last(dotted(arg.annotation))
        for arg, default in zip(
            args.args[len(args.args) - len(args.defaults) :], args.defaults, strict=False
        ):
            value = _literal(default)
            if isinstance(value, (str, int, float, bool)):
                facts.init_defaults[arg.arg] = value
    entry = methods.get("forward") or methods.get("__call__")
    if entry is not None:
        facts.has_forward = True
        _Reader(facts, methods, helpers).function(entry, 0)  # type: ignore[arg-type]
    return facts


def read_module(tree: ast.Module) -> tuple[list[ClassFacts], dict[str, ast.FunctionDef]]:
    """Every class of a file (nested ones included) and its top-level functions."""
    helpers = {
        n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    classes = [
        read_class(n, helpers)  # type: ignore[arg-type]
        for n in statements(tree.body)
        if isinstance(n, ast.ClassDef)
    ]
    return classes, helpers  # type: ignore[return-value]


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement under ``body``, through compound statements, never into
    expressions: finding classes and imports this way costs a fraction of ast.walk."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from statements(inner)
        for handler in getattr(stmt, "handlers", []) or []:
            yield from statements(handler.body)


class LazyClasses(dict[str, ClassFacts]):
    """Classes of an imported file, read only when a name is looked up: a diffusers
    block imports a few classes from a 200 KB file, and reading all of them would cost
    more than the block itself."""

    def __init__(self, nodes: dict[str, ast.ClassDef], helpers: dict[str, ast.FunctionDef]) -> None:
        super().__init__()
        self.nodes = nodes
        self.helpers = helpers

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    def get(self, name: str, default: ClassFacts | None = None) -> ClassFacts | None:  # type: ignore[override]
        if name not in self.nodes:
            return default
        if not dict.__contains__(self, name):
            self[name] = read_class(self.nodes[name], self.helpers)
        return dict.__getitem__(self, name)

    def __getitem__(self, name: str) -> ClassFacts:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found
