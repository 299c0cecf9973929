"""Python expressions as the model reader evaluates them: names, attributes, calls,
indexing, arithmetic and comparisons on its values (tensor operations become graph
nodes, known numbers are folded, the rest stays symbolic), dispatched on the node's type
through one table."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from kb.scan.model.calls import Calls
from kb.scan.model.frames import Bound, Frame, TensorMethod
from kb.scan.model.graph import (
    UNKNOWN,
    Alt,
    ClassRef,
    Const,
    DictVal,
    Ext,
    Func,
    Inst,
    Node,
    Seq,
    Slice,
    Sym,
    decider,
    label,
    merge,
    simple_name,
    truth,
)
from kb.scan.model.ops import ACTIVATION_LOOKUPS

#: Python literals folded when both operands are known (small results only)
_FOLD: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_BINOPS: dict[type, str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "div",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.BitAnd: "logic",
    ast.BitOr: "logic",
    ast.BitXor: "logic",
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


class Expressions(Calls):
    """Expression evaluation; the interpreter adds statements and the graph."""

    # -- provided by the interpreter ----------------------------------------------------------
    def tick(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def global_value(self, file: str, name: str) -> Any:  # pragma: no cover
        raise NotImplementedError

    def assign(
        self, target: ast.expr, value: Any, frame: Frame, at: ast.AST
    ) -> None:  # pragma: no cover
        raise NotImplementedError

    def ev(self, node: ast.expr | None, frame: Frame) -> Any:
        if node is None:
            return Const(None)
        self.tick()
        handler = _EXPRESSIONS.get(type(node))
        return handler(self, node, frame) if handler is not None else UNKNOWN

    def ex_constant(self, node: ast.Constant, frame: Frame) -> Any:
        return Const(node.value)

    def ex_name(self, node: ast.Name, frame: Frame) -> Any:
        if node.id in frame.env:
            return frame.env[node.id]
        if frame.closure is not None and node.id in frame.closure:
            return frame.closure[node.id]
        return self.global_value(frame.file, node.id)

    def ex_attribute(self, node: ast.Attribute, frame: Frame) -> Any:
        return self.getattr(self.ev(node.value, frame), node.attr, frame, node)

    def ex_subscript(self, node: ast.Subscript, frame: Frame) -> Any:
        if _names_lookup(node.value):  # ACT2FN["gelu"]: the table's spelling picks the function
            return self.activation_leaf(self.ev(node.slice, frame), node)
        base = self.ev(node.value, frame)
        return self.subscript(base, node.slice, frame, node)

    def subscript(self, base: Any, index_node: ast.expr, frame: Frame, at: ast.AST) -> Any:
        if isinstance(base, Node):
            index = self.index(index_node, frame)
            if len(index) == 1 and base.op in TUPLE_OPS:
                first = index[0]
                if isinstance(first, Const) and isinstance(first.value, int):
                    return self.item(base, first.value, frame, at)
                parts = _slice_range(first, tuple_len(base))
                if parts is not None:  # out[:3] of a chunk: the first three chunks
                    return Seq(tuple(self.item(base, i, frame, at) for i in parts))
            return self.node("getitem", (base,), {"index": index}, frame, at)
        if isinstance(index_node, ast.Slice) and isinstance(base, Seq):
            lower, upper = (
                self.ev(b, frame) if b is not None else Const(None)
                for b in (index_node.lower, index_node.upper)
            )
            bounds = [b.value if isinstance(b, Const) else UNKNOWN for b in (lower, upper)]
            if base.repeated or not all(b is None or isinstance(b, int) for b in bounds):
                return base  # self.layers[:n]: the same layers
            lo, hi = (b if isinstance(b, int) else None for b in bounds)
            return Seq(base.items[lo:hi], base.kind)
        key = self.ev(index_node, frame)
        if isinstance(base, (Seq, Alt)) or (
            isinstance(base, Const) and isinstance(base.value, (tuple, list))
        ):
            if isinstance(key, Const) and isinstance(key.value, int):
                return self.item(base, key.value, frame, at)
            if isinstance(base, Seq) and base.items and isinstance(key, (Sym, Node)):
                if base.repeated or len(base.items) == 1:
                    return base.items[0]
                return _one_per_class(base.items, decider(index_node))
            return UNKNOWN
        if isinstance(base, DictVal):
            if isinstance(key, Const):
                try:
                    return base.items.get(key.value, UNKNOWN)
                except TypeError:
                    return UNKNOWN
            values = list(base.items.values())  # a key the reader does not know: any entry
            return merge(values, decider(index_node)) if values and len(values) <= 6 else UNKNOWN
        if isinstance(base, Ext):
            return self.ext_item(base, key)
        if isinstance(base, Inst) and base.config and isinstance(key, Const):
            return self.getattr(base, str(key.value), frame, at)
        if isinstance(base, Sym):
            return Sym(f"{base.name}[{label(key)}]", base.loop)
        return UNKNOWN

    def index(self, node: ast.expr, frame: Frame) -> tuple[Any, ...]:
        """An index expression as a tuple of Const, Slice, Node, Sym and None entries."""
        parts = node.elts if isinstance(node, ast.Tuple) else [node]
        out: list[Any] = []
        for part in parts:
            if isinstance(part, ast.Slice):
                out.append(
                    Slice(
                        self.ev(part.lower, frame) if part.lower else None,
                        self.ev(part.upper, frame) if part.upper else None,
                        self.ev(part.step, frame) if part.step else None,
                    )
                )
            else:
                out.append(self.ev(part, frame))
        return tuple(out)

    def ex_call(self, node: ast.Call, frame: Frame) -> Any:
        if _names_lookup(node.func) and node.args:  # get_activation("gelu")
            return self.activation_leaf(self.ev(node.args[0], frame), node)
        func = self.ev(node.func, frame)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                spread = self.ev(a.value, frame)
                args += (
                    list(spread.items)
                    if isinstance(spread, Seq) and not spread.repeated
                    else [UNKNOWN]
                )
            else:
                args.append(self.ev(a, frame))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            value = self.ev(kw.value, frame)
            if kw.arg is not None:
                kwargs[kw.arg] = value
            elif isinstance(value, DictVal):
                kwargs.update({str(k): v for k, v in value.items.items()})
        result = self.call(func, args, kwargs, frame, node)
        if result is UNKNOWN or (isinstance(result, Const) and result.value is None):
            # a lookup handed a function as its default (``get_interface(key, eager_fn)``):
            # what it returns may be that function
            handed = [a for a in (*args, *kwargs.values()) if isinstance(a, Func)]
            if handed:
                result = handed[0] if len(handed) == 1 else Alt(tuple(handed))
        if (
            isinstance(func, Bound)
            and isinstance(func.value, Seq)
            and func.name in ("append", "extend", "insert")
        ):
            added = (
                tuple(args[-1:])
                if func.name != "extend"
                else (args[0].items if args and isinstance(args[0], Seq) else ())
            )
            # appended in a loop of this function (not of a caller building several of
            # this module): one element standing for many
            grown = Seq(
                func.value.items + added,
                func.value.kind,
                func.value.repeated or frame.loop > frame.entry_loop,
            )
            self.assign(node.func.value, grown, frame, node)  # type: ignore[attr-defined]
        if isinstance(func, TensorMethod) and func.name.endswith("_") and isinstance(result, Node):
            self.assign(node.func.value, result, frame, node)  # type: ignore[attr-defined]  # x.copy_(y) rebinds x
        return result

    def ex_binop(self, node: ast.BinOp, frame: Frame) -> Any:
        return self.binop(
            type(node.op), self.ev(node.left, frame), self.ev(node.right, frame), frame, node
        )

    def binop(self, op: type, left: Any, right: Any, frame: Frame, at: ast.AST) -> Any:
        if isinstance(left, Node) or isinstance(right, Node):
            name = _BINOPS.get(op)
            return self.node(name, (left, right), None, frame, at) if name else UNKNOWN
        if isinstance(left, Const) and isinstance(right, Const) and op in _FOLD:
            a, b = left.value, right.value
            if (
                isinstance(a, (int, float))
                and isinstance(b, (int, float))
                and not (op is ast.Pow and abs(b) > 64)
            ):
                try:
                    return Const(_FOLD[op](a, b))
                except (ArithmeticError, ValueError, TypeError):
                    return UNKNOWN
            if op is ast.Add and isinstance(a, (tuple, list, str)) and type(a) is type(b):
                return Const(a + b)  # type: ignore[operator]
            return UNKNOWN
        if isinstance(left, Seq) and isinstance(right, Seq) and op is ast.Add:
            return Seq(left.items + right.items, left.kind)
        if isinstance(left, (Sym, Const)) and isinstance(right, (Sym, Const)):
            looped = any(isinstance(v, Sym) and v.loop for v in (left, right))  # i + offset
            return Sym(f"({label(left)} {_SYMBOL.get(op, '?')} {label(right)})", looped)
        return UNKNOWN

    def ex_unary(self, node: ast.UnaryOp, frame: Frame) -> Any:
        value = self.ev(node.operand, frame)
        if isinstance(node.op, ast.Not):
            known = truth(value)
            return Const(not known) if known is not None else UNKNOWN
        if isinstance(value, Node):
            return (
                self.node("neg", (value,), None, frame, node)
                if isinstance(node.op, ast.USub)
                else value
            )
        if (
            isinstance(value, Const)
            and isinstance(value.value, (int, float))
            and not isinstance(value.value, bool)
        ):
            return Const(-value.value if isinstance(node.op, ast.USub) else value.value)
        if isinstance(value, Sym) and isinstance(node.op, ast.USub):
            return Sym(f"-{value.name}", value.loop)
        return UNKNOWN

    def ex_boolop(self, node: ast.BoolOp, frame: Frame) -> Any:
        is_and = isinstance(node.op, ast.And)
        result: Any = UNKNOWN
        undecided = False
        for part in node.values:
            result = self.ev(part, frame)
            known = truth(result)
            if known is None:
                undecided = True
            elif known is not is_and:  # and: a false one decides; or: a true one
                return (
                    result if not undecided else (Const(False) if is_and and not known else UNKNOWN)
                )
        return UNKNOWN if undecided else result

    def ex_compare(self, node: ast.Compare, frame: Frame) -> Any:
        left = self.ev(node.left, frame)
        result: Any = Const(True)
        for op, right_node in zip(node.ops, node.comparators, strict=False):
            right = self.ev(right_node, frame)
            one = self.compare(op, left, right, frame, node)
            if isinstance(one, Node):
                return one
            known = truth(one)
            if known is False:
                return Const(False)
            if known is None:
                result = one if len(node.ops) == 1 and isinstance(one, Alt) else UNKNOWN
            left = right
        return result

    def compare(self, op: ast.cmpop, left: Any, right: Any, frame: Frame, at: ast.AST) -> Any:
        if isinstance(op, (ast.Is, ast.IsNot)):
            same = _is(left, right)
            if same is None:
                # either, decided by the test as written: ``is_causal=mask is None`` keeps
                # that the flag is true whenever nothing is handed in
                if _none(right) and isinstance(at, ast.expr):
                    return Alt((Const(True), Const(False)), decider(at))
                return UNKNOWN
            return Const(same if isinstance(op, ast.Is) else not same)
        if isinstance(left, Node) or isinstance(right, Node):
            # which comparison: an ordering of positions is a triangle (a causal mask)
            return self.node("eq", (left, right), {"cmp": Const(type(op).__name__)}, frame, at)
        if isinstance(left, Const) and isinstance(right, Const) and type(op) in _COMPARE:
            try:
                return Const(bool(_COMPARE[type(op)](left.value, right.value)))
            except TypeError:
                return UNKNOWN
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, Const):
            pool = right.value if isinstance(right, Const) else None
            if isinstance(pool, (tuple, list, str, set, frozenset)):
                try:
                    return Const((left.value in pool) == isinstance(op, ast.In))
                except TypeError:
                    return UNKNOWN
        return UNKNOWN

    def ex_ifexp(self, node: ast.IfExp, frame: Frame) -> Any:
        known = truth(self.ev(node.test, frame))
        if known is not None:
            return self.ev(node.body if known else node.orelse, frame)
        body, orelse = self.ev(node.body, frame), self.ev(node.orelse, frame)
        test = node.test
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and _none(self.ev(test.comparators[0], frame))
        ):
            # ``Default if given is None else given``: the branch that hands ``given`` on
            # runs only when it is not None (its None alternative is not that branch's)
            if isinstance(test.ops[0], ast.Is):
                orelse = _not_none(orelse, node.orelse, test.left)
            else:
                body = _not_none(body, node.body, test.left)
        return merge([body, orelse], decider(node.test))

    def ex_sequence(self, node: ast.Tuple | ast.List | ast.Set, frame: Frame) -> Any:
        items: list[Any] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                spread = self.ev(elt.value, frame)
                items += list(spread.items) if isinstance(spread, Seq) else [UNKNOWN]
            else:
                items.append(self.ev(elt, frame))
        if isinstance(node, ast.List) and not items:
            return Seq((), "list")  # filled by append (a loop's outputs, then one cat)
        if all(isinstance(i, Const) for i in items):
            return Const(tuple(i.value for i in items))
        return Seq(tuple(items), "list" if isinstance(node, ast.List) else "tuple")

    def ex_dict(self, node: ast.Dict, frame: Frame) -> Any:
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=False):
            value = self.ev(v, frame)
            if k is None:
                if isinstance(value, DictVal):
                    out.update(value.items)
                continue
            key = self.ev(k, frame)
            if isinstance(key, Const):
                try:
                    out[key.value] = value
                except TypeError:
                    continue
        return DictVal(out)

    def ex_comprehension(
        self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp, frame: Frame
    ) -> Any:
        """One element per item of a short literal sequence (``[t.transpose(1, 2) for t in
        (q, k, v)]``); otherwise one element computed with the first item, standing for all."""
        inner = Frame(
            dict(frame.env), frame.file, frame.owner, frame.loop + 1, closure=frame.closure
        )
        inner.entry_loop = frame.entry_loop  # the comprehension is a loop of this function
        if len(node.generators) == 1 and not node.generators[0].ifs:
            gen = node.generators[0]
            source = self.ev(gen.iter, inner)
            if isinstance(source, Seq) and not source.repeated and 1 < len(source.items) <= 8:
                out = []
                for item in source.items:
                    self.assign(gen.target, item, inner, node)
                    out.append(self.ev(node.elt, inner))
                return Seq(tuple(out), "list")
        for gen in node.generators:
            items = self.iterate(self.ev(gen.iter, inner))
            self.assign(gen.target, items[0] if items else UNKNOWN, inner, node)
        return Seq((self.ev(node.elt, inner),), "list", repeated=True)

    def ex_dictcomp(self, node: ast.DictComp, frame: Frame) -> Any:
        return DictVal({})

    def ex_lambda(self, node: ast.Lambda, frame: Frame) -> Any:
        return Func(node, frame.file, closure=frame.env)

    def ex_namedexpr(self, node: ast.NamedExpr, frame: Frame) -> Any:
        value = self.ev(node.value, frame)
        frame.env[node.target.id] = value
        return value

    def ex_starred(self, node: ast.Starred, frame: Frame) -> Any:
        return self.ev(node.value, frame)

    def ex_string(self, node: ast.JoinedStr, frame: Frame) -> Any:
        return Sym("str")


def _names_lookup(node: ast.expr) -> bool:
    """The expression names an activation table or factory (:data:`ACTIVATION_LOOKUPS`)."""
    return simple_name(node) in ACTIVATION_LOOKUPS


def tuple_len(node: Node) -> int | None:
    """How many tensors an op returning a tuple returns, when its arguments say."""
    if node.op in ("topk", "sort"):
        return 2
    if node.op == "chunk":
        n = node.arg(1, "chunks")
        return n.value if isinstance(n, Const) and isinstance(n.value, int) else None
    if node.op == "split":
        sizes = node.arg(1, "split_size_or_sections")
        if isinstance(sizes, Seq):
            return len(sizes.items)
        if isinstance(sizes, Const) and isinstance(sizes.value, (tuple, list)):
            return len(sizes.value)
    return None


def _slice_range(index: Any, count: int | None) -> range | None:
    if not isinstance(index, Slice) or index.step is not None:
        return None
    lower = (
        index.lower.value if isinstance(index.lower, Const) else 0 if index.lower is None else None
    )
    upper = (
        index.upper.value
        if isinstance(index.upper, Const)
        else count
        if index.upper is None
        else None
    )
    if not isinstance(lower, int) or not isinstance(upper, int):
        return None
    if lower < 0 or upper < 0:
        if count is None:
            return None
        lower, upper = lower % count if lower < 0 else lower, upper % count if upper < 0 else upper
    return range(lower, min(upper, lower + 16))


def _one_per_class(items: tuple[Any, ...], why: str) -> Any:
    """``experts[i]`` with ``i`` unknown over a list of modules of a few classes (routed
    MLPs and identity experts in one list): any of them, one instance per class."""
    if not all(isinstance(i, Inst) for i in items):
        return UNKNOWN
    kinds = list({id(i.cls.node) if i.cls is not None else i.name: i for i in items}.values())
    return merge(kinds, why) if len(kinds) <= 4 else UNKNOWN


def _not_none(value: Any, branch: ast.expr, tested: ast.expr) -> Any:
    """``value`` without its None alternatives when ``branch`` is the expression tested
    against None (so it is not None there)."""
    if not isinstance(value, Alt) or ast.dump(branch) != ast.dump(tested):
        return value
    rest = tuple(o for o in value.options if not _none(o))
    return value if not rest else rest[0] if len(rest) == 1 else Alt(rest, value.why)


def _none(value: Any) -> bool:
    return isinstance(value, Const) and value.value is None


def _is(left: Any, right: Any) -> bool | None:
    """``left is right`` where the reader knows."""
    if isinstance(right, Const) and right.value is None:
        if isinstance(left, Const):
            return left.value is None
        if isinstance(left, (Node, Inst, Func, ClassRef, Seq, DictVal)):
            if isinstance(left, Node) and left.op == "input":
                return None  # a forward argument: the caller may pass None
            return False
        return None
    if isinstance(left, Const) and isinstance(right, Const):
        return left.value is right.value
    return None


_SYMBOL: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}


#: ops whose result is a tuple of tensors (indexed by a literal: one of them)
TUPLE_OPS = frozenset(
    {
        "chunk",
        "split",
        "unbind",
        "topk",
        "sort",
        "part",
        "method",
        "nonzero",
        "rearrange",
        "call",
        "amax",
        "amin",
    }
)

_EXPRESSIONS: dict[type, Callable[[Expressions, Any, Frame], Any]] = {
    ast.Constant: Expressions.ex_constant,
    ast.Name: Expressions.ex_name,
    ast.Attribute: Expressions.ex_attribute,
    ast.Subscript: Expressions.ex_subscript,
    ast.Call: Expressions.ex_call,
    ast.BinOp: Expressions.ex_binop,
    ast.UnaryOp: Expressions.ex_unary,
    ast.BoolOp: Expressions.ex_boolop,
    ast.Compare: Expressions.ex_compare,
    ast.IfExp: Expressions.ex_ifexp,
    ast.Tuple: Expressions.ex_sequence,
    ast.List: Expressions.ex_sequence,
    ast.Set: Expressions.ex_sequence,
    ast.Dict: Expressions.ex_dict,
    ast.ListComp: Expressions.ex_comprehension,
    ast.GeneratorExp: Expressions.ex_comprehension,
    ast.SetComp: Expressions.ex_comprehension,
    ast.DictComp: Expressions.ex_dictcomp,
    ast.Lambda: Expressions.ex_lambda,
    ast.NamedExpr: Expressions.ex_namedexpr,
    ast.Starred: Expressions.ex_starred,
    ast.JoinedStr: Expressions.ex_string,
}
