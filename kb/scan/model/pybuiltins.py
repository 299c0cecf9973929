"""Python's builtins as the model reader evaluates them: ``len``, ``range``, ``enumerate``,
``getattr`` ... on the reader's values (numbers it knows are computed, the rest stays
symbolic), and ``math`` functions of literals."""

from __future__ import annotations

import math
from typing import Any

from kb.scan.model.frames import Bound, Frame, SuperRef, last_name
from kb.scan.model.graph import (
    UNKNOWN,
    ClassRef,
    Const,
    DictVal,
    Ext,
    Func,
    Inst,
    Node,
    Seq,
    Sym,
)


def math_call(name: str, args: list[Any]) -> Any:
    if name == "pi":
        return Const(math.pi)
    values = [a.value for a in args if isinstance(a, Const)]
    if len(values) == len(args) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    ):
        fn = getattr(math, name, None)
        if callable(fn):
            try:
                return Const(fn(*values))
            except (ValueError, TypeError, ArithmeticError):
                return UNKNOWN
    return Sym(f"{name}(...)")


# -- builtins ---------------------------------------------------------------------------------------


def _b_super(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    cls = frame.env.get("__class__")
    inst = next((v for k, v in frame.env.items() if k == "self"), None)
    if inst is None and frame.env:
        inst = next(iter(frame.env.values()))
    if len(args) == 2 and isinstance(args[0], ClassRef):
        cls, inst = args[0], args[1]
    return SuperRef(cls, inst) if isinstance(cls, ClassRef) else Ext("builtins.noop_super")


def _b_noop(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    return Const(None)


def _b_len(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    value = args[0] if args else UNKNOWN
    if isinstance(value, Seq) and not value.repeated:
        return Const(len(value.items))
    if isinstance(value, Const) and isinstance(value.value, (tuple, list, str)):
        return Const(len(value.value))
    return Sym("len(...)")


def _b_range(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    return Seq((Sym("i", True),), "list", repeated=True)


def _b_enumerate(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    items = c.iterate(args[0]) if args else [UNKNOWN]
    return Seq(tuple(Seq((Sym("i", True), it)) for it in items), "list")


def _b_zip(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    firsts = [c.iterate(a)[:1] or [UNKNOWN] for a in args]
    return Seq((Seq(tuple(f[0] for f in firsts)),), "list", repeated=True)


def _b_getattr(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    if len(args) >= 2 and isinstance(args[1], Const) and isinstance(args[1].value, str):
        found = c.getattr(args[0], args[1].value, frame, at)
        if (found is UNKNOWN or isinstance(found, Sym)) and len(args) > 2:
            return args[2]
        return found
    return args[2] if len(args) > 2 else UNKNOWN


def _b_hasattr(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    if len(args) == 2 and isinstance(args[0], Inst) and isinstance(args[1], Const):
        name = str(args[1].value)
        if name in args[0].attrs or (args[0].cls is not None and c.lookup_class(args[0].cls, name)):
            return Const(True)
    return UNKNOWN


def _b_isinstance(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    if len(args) != 2:
        return UNKNOWN
    value, kinds = args
    names = [
        last_name(k.dotted)
        for k in (kinds.items if isinstance(kinds, Seq) else (kinds,))
        if isinstance(k, Ext)
    ]
    if not names:
        return UNKNOWN
    if isinstance(value, Node) and value.op != "input":
        return Const("Tensor" in names)
    if isinstance(value, Node):
        return Const(True) if "Tensor" in names else UNKNOWN
    if isinstance(value, Const):
        return Const(type(value.value).__name__ in names)
    if isinstance(value, Seq):
        return Const(value.kind in names)
    return UNKNOWN


def _b_cast(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    value = args[0] if args else UNKNOWN
    return value if isinstance(value, (Const, Sym)) else Sym("number")


def _b_minmax(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    if args and all(isinstance(a, Const) and isinstance(a.value, (int, float)) for a in args):
        return Const(min(a.value for a in args))  # type: ignore[type-var]  # max is rarely a fact we read
    return Sym("min/max(...)")


def _b_seq(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    if not args:
        return Seq((), "list")
    value = args[0]
    return (
        value
        if isinstance(value, (Seq, Const))
        else Seq(tuple(c.iterate(value)), "list", repeated=True)
    )


def _b_sum(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    value = args[0] if args else UNKNOWN
    items = c.iterate(value)
    tensors = [i for i in items if isinstance(i, Node)]
    if tensors:
        return c.node("add", tuple(tensors), {"reduce": Const(True)}, frame, at)
    return Sym("sum(...)")


def _b_partial(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    if args and isinstance(args[0], Func):
        f = args[0]
        return Func(
            f.node, f.file, f.bound, f.closure, f.owner_cls, (tuple(args[1:]), dict(kwargs))
        )
    if args and isinstance(args[0], (Ext, ClassRef)):  # a class with arguments fixed
        return Bound(Seq((args[0], Seq(tuple(args[1:])), DictVal(dict(kwargs)))), "partial")
    return UNKNOWN


def _b_dict(c: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, at: Any) -> Any:
    base = dict(args[0].items) if args and isinstance(args[0], DictVal) else {}
    return DictVal({**base, **kwargs})


EXT_BUILTINS = {
    "super": _b_super,
    "print": _b_noop,
    "builtins.noop": _b_noop,
    "builtins.noop_super": _b_noop,
    "len": _b_len,
    "range": _b_range,
    "enumerate": _b_enumerate,
    "zip": _b_zip,
    "getattr": _b_getattr,
    "hasattr": _b_hasattr,
    "isinstance": _b_isinstance,
    "int": _b_cast,
    "float": _b_cast,
    "round": _b_cast,
    "min": _b_minmax,
    "max": _b_minmax,
    "list": _b_seq,
    "tuple": _b_seq,
    "sorted": _b_seq,
    "reversed": _b_seq,
    "sum": _b_sum,
    "functools.partial": _b_partial,
    "partial": _b_partial,
    "dict": _b_dict,
    "setattr": _b_noop,
}
