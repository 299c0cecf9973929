"""The values the model reader computes with, and the dataflow graph they form.

A tensor is a :class:`Node`: a canonical op (:mod:`kb.scan.model.ops`) of its operands,
where it was written (file and line) and which module instance's code made it.  Other
values are what Python code passes around while building and running modules: literals
(:class:`Const`), numbers known only by where they come from (:class:`Sym`), tuples and
lists (:class:`Seq`), dicts, module and dataclass instances (:class:`Inst`), functions,
classes, external names (:class:`Ext`), a value of one of several kinds (:class:`Alt`)
and :data:`UNKNOWN`.  Nothing here runs model code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True, slots=True)
class Const:
    """A Python literal (number, string, bool, None, or a tuple of them); ``origin`` says
    where a hyper-parameter came from (a configuration default, the model config)."""

    value: object
    origin: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Sym:
    """A non-tensor value known by its origin: ``config.num_heads``, a forward argument, a
    loop index; ``default`` is what it is when nothing overrides it (not a fact)."""

    name: str
    loop: bool = False


@dataclass(slots=True)
class Seq:
    """A tuple or list; ``repeated`` when it stands for the same element many times (a
    comprehension, a ``ModuleList`` of one block class)."""

    items: tuple[Any, ...]
    kind: str = "tuple"
    repeated: bool = False


@dataclass(slots=True)
class DictVal:
    items: dict[Any, Any]


@dataclass(frozen=True, slots=True)
class Ext:
    """A name from outside the code the reader follows (``torch.nn.functional.softmax``)."""

    dotted: str


@dataclass(slots=True)
class Alt:
    """A value that is one of ``options`` (an ``if`` the reader could not decide);
    ``why`` says what decides (the condition's or the key's source text)."""

    options: tuple[Any, ...]
    why: str = ""


@dataclass(eq=False, slots=True)
class ClassRef:
    node: ast.ClassDef
    file: str


@dataclass(eq=False, slots=True)
class Func:
    """A function, method or lambda; ``bound`` is the instance of a bound method and
    ``partial`` the arguments of ``functools.partial``."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    file: str
    bound: Any = None
    closure: dict[str, Any] | None = None
    owner_cls: ClassRef | None = None  # the class whose body defines it (for super())
    partial: tuple[tuple[Any, ...], dict[str, Any]] | None = None


@dataclass(eq=False, slots=True)
class ModuleVal:
    """A Python module bound to a name: ``dotted`` and its file when it is in reach."""

    dotted: str
    file: str | None


@dataclass(eq=False)
class Inst:
    """An instance: of a class the reader follows (``cls``), or an external module leaf
    (``leaf`` names its op, ``kwargs`` its literal constructor arguments)."""

    name: str  # the class name
    cls: ClassRef | None = None
    leaf: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    parent: Inst | None = None
    attr: str = ""  # the attribute of ``parent`` holding it
    module: bool = True  # an nn.Module (owns computation) rather than a plain object
    items: tuple[Any, ...] = ()  # a Sequential's modules
    config: bool = False  # a model configuration object (attributes are hyper-parameters)
    standalone: bool = False  # a root built on its own (not by the model that uses it)
    line: int = 0

    @property
    def path(self) -> str:
        parts = []
        here: Inst | None = self
        while here is not None and here.parent is not None:
            parts.append(here.attr)
            here = here.parent
        root = here.name if here is not None else ""
        return ".".join([root, *reversed(parts)])

    def ancestors(self) -> list[Inst]:
        out = []
        here: Inst | None = self
        while here is not None:
            out.append(here)
            here = here.parent
        return out

    def module_owner(self) -> Inst:
        """The nearest ``nn.Module`` at or above this instance (a processor's module)."""
        for inst in self.ancestors():
            if inst.module and inst.leaf is None:
                return inst
        return self

    def __repr__(self) -> str:
        return f"Inst({self.name} at {self.path})"


_NEXT = [0]


class Node:
    """One tensor-valued computation."""

    __slots__ = ("args", "file", "id", "kw", "line", "loop", "op", "owner")

    def __init__(
        self,
        op: str,
        args: tuple[Any, ...],
        kw: dict[str, Any] | None,
        file: str,
        line: int,
        owner: Inst | None,
        loop: int = 0,
    ) -> None:
        self.op = op
        self.args = args
        self.kw = kw or {}
        self.file = file
        self.line = line
        self.owner = owner
        self.loop = loop
        _NEXT[0] += 1
        self.id = _NEXT[0]

    def operands(self) -> Iterator[Node]:
        """The tensors this node reads (inside tuples, lists and index expressions too)."""
        yield from _nodes_in(self.args)
        yield from _nodes_in(tuple(self.kw.values()))

    def arg(self, i: int, name: str = "") -> Any:
        """Positional operand ``i`` or keyword ``name`` (UNKNOWN when absent)."""
        if name and name in self.kw:
            return self.kw[name]
        return self.args[i] if i < len(self.args) else UNKNOWN

    def __repr__(self) -> str:
        return f"Node({self.op}@{self.line})"


def _nodes_in(values: tuple[Any, ...]) -> Iterator[Node]:
    for v in values:
        if isinstance(v, Node):
            yield v
        elif isinstance(v, Seq):
            yield from _nodes_in(v.items)
        elif isinstance(v, Alt):
            yield from _nodes_in(v.options)
        elif isinstance(v, tuple):
            yield from _nodes_in(v)
        elif isinstance(v, Slice):
            yield from _nodes_in((v.lower, v.upper, v.step))


@dataclass(frozen=True, slots=True)
class Slice:
    """One ``a:b:c`` of an index (each bound a value or None)."""

    lower: Any
    upper: Any
    step: Any


def const(value: Any) -> object:
    """The Python value of a literal, else the sentinel :data:`UNKNOWN`."""
    if isinstance(value, Const):
        return value.value
    return UNKNOWN


def label(value: Any) -> str:
    """A short text of a non-tensor value for facts and symbols ("config.num_heads", "128")."""
    if isinstance(value, Const):
        return repr(value.value)
    if isinstance(value, Sym):
        return value.name
    return "?"


def simple_name(node: ast.AST) -> str:
    """``f`` of ``f`` or ``a.b.f`` (empty for any other expression)."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def is_tensor(value: Any) -> bool:
    return isinstance(value, Node)


class Returned(Exception):
    """Raised to leave a body at ``return``, ``break`` or ``continue``."""


def truth(value: Any) -> bool | None:
    """Whether a value is true, when the reader knows (None: it does not)."""
    if isinstance(value, Const):
        try:
            return bool(value.value)
        except Exception:  # a literal whose truth raises: not one we know
            return None
    if isinstance(value, (Inst, Func, ClassRef, ModuleVal)):
        return True
    if isinstance(value, Seq):
        return bool(value.items) if not value.repeated else True
    return None


def decider(node: ast.expr) -> str:
    """What decides an undecided branch or lookup, as the source writes it (short)."""
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def merge(values: list[Any], why: str = "") -> Any:
    """One value for the alternatives of an undecided branch; ``why`` (what decides, as
    the source writes it) rides on the merged value for the facts that stay unknown."""
    unique: list[Any] = []
    for v in values:
        if not any(v is u or (isinstance(v, Const) and v == u) for u in unique):
            unique.append(v)
    if len(unique) == 1:
        return unique[0]
    if any(u is UNKNOWN for u in unique):
        rest = [u for u in unique if u is not UNKNOWN]
        # a value computed on one side, or a function chosen on one side where the other
        # looks one up in a table we cannot read (``fn = eager; if impl != "eager": fn =
        # TABLE[impl]``): what is read is what the code can be seen to run
        return rest[0] if len(rest) == 1 and isinstance(rest[0], (Node, Func)) else UNKNOWN
    if all(isinstance(u, Node) for u in unique):
        first = unique[0]
        kw = {"why": Const(why)} if why else None
        return Node("phi", tuple(unique), kw, first.file, first.line, first.owner, first.loop)
    if all(isinstance(u, Seq) for u in unique) and len({len(u.items) for u in unique}) == 1:
        return Seq(
            tuple(merge([u.items[i] for u in unique], why) for i in range(len(unique[0].items))),
            unique[0].kind,
        )
    flat: list[Any] = []
    for u in unique:
        flat += list(u.options) if isinstance(u, Alt) else [u]
        why = why or (u.why if isinstance(u, Alt) else "")
    return Alt(tuple(flat), why) if len(flat) <= 6 else UNKNOWN
