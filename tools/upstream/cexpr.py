"""Read the conditions of op-plugin's ``TORCH_CHECK``s into what they accept.

A wrapper guards its arguments with C++ conditions such as
``rotary_mode == "half" || rotary_mode == "interleave"``,
``sparse_mode >= 0 && sparse_mode <= 6``, ``x.dim() == 3 || x.dim() == 2`` or
``trans && !is_cross && mode == 0``.  This module parses such a condition (a small
recursive-descent parser over C++ tokens, no compiler) and reduces every conjunct that
speaks about one subject — a parameter's value, its rank, one of its sizes or its dtype —
to the set of values it accepts.  A conjunct that mixes subjects or uses anything the
parser does not know stays *opaque*: it is reported as text, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Literal = bool | int | float | str

_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?[uUlLfF]*)'
    r"|(?P<op>::|->|&&|\|\||==|!=|<=|>=|[()\[\]<>!.,?:*/+\-%&|~])"
    r"|(?P<id>[A-Za-z_]\w*))"
)

#: ``at::kHalf`` / ``at::ScalarType::Half`` / ``c10::kBFloat16`` → canonical dtype names.
_DTYPES = {
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Float": "float32",
    "Double": "float64",
    "Int": "int32",
    "Long": "int64",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
    "Float8_e4m3fn": "float8_e4m3fn",
    "Float8_e5m2": "float8_e5m2",
    "UInt32": "uint32",
    "UInt64": "uint64",
    "ComplexFloat": "complex64",
}


class Unparsed(Exception):
    """The condition uses something this reader does not model."""


@dataclass(frozen=True)
class Operand:
    """One side of a comparison: what it is about (``kind``) and of which parameter."""

    kind: str  # value | dim | size | dtype | present | literal | other
    param: str = ""
    index: int = 0  # for size
    value: Literal | None = None  # for literal
    text: str = ""


@dataclass(frozen=True)
class Compare:
    left: Operand
    op: str  # == != < <= > >= truth not
    right: Operand | None = None


@dataclass(frozen=True)
class Node:
    op: str  # and | or | atom
    items: tuple[Node, ...] = ()
    atom: Compare | None = None


@dataclass
class Accepts:
    """What one conjunct accepts about one subject: a set of values or intervals."""

    kind: str  # value | dim | size | dtype | present
    param: str
    index: int = 0
    values: list[Literal] = field(default_factory=list)  # closed set (==)
    intervals: list[tuple[float | None, bool, float | None, bool]] = field(default_factory=list)
    excluded: list[Literal] = field(default_factory=list)  # != terms

    def admits(self, value: Literal) -> bool | None:
        """Whether ``value`` passes; None when the check cannot say (a type mismatch)."""
        if value in self.excluded:
            return False
        if self.values and not self.intervals:
            return _loose(value) in [_loose(v) for v in self.values]
        if self.intervals:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            if _loose(value) in [_loose(v) for v in self.values]:
                return True
            return any(_inside(value, iv) for iv in self.intervals)
        return True if self.excluded else None

    def describe(self) -> str:
        parts = [repr(v) for v in self.values]
        for lo, lo_in, hi, hi_in in self.intervals:
            left = "(-inf" if lo is None else ("[" if lo_in else "(") + _num(lo)
            right = "inf)" if hi is None else _num(hi) + ("]" if hi_in else ")")
            parts.append(f"{left}, {right}")
        text = " or ".join(parts) if parts else "anything"
        if self.excluded:
            text += " except " + ", ".join(repr(v) for v in self.excluded)
        return text


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _loose(v: object) -> object:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return v
    return float(v)


def _numeric(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _inside(value: float, iv: tuple[float | None, bool, float | None, bool]) -> bool:
    lo, lo_in, hi, hi_in = iv
    if lo is not None and (value < lo or (value == lo and not lo_in)):
        return False
    return not (hi is not None and (value > hi or (value == hi and not hi_in)))


def tokenize(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise Unparsed(f"cannot read {text[pos : pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        tok = m.group(kind)
        if kind == "id" and tok in _ALTERNATIVE:  # C++'s ``and`` / ``or`` / ``not``
            kind, tok = "op", _ALTERNATIVE[tok]
        out.append((kind, tok))
    return out


#: C++'s alternative spellings of the logical operators
_ALTERNATIVE = {"and": "&&", "or": "||", "not": "!"}

Resolver = Callable[[str], "Literal | None"]
#: Type names a C cast ``(T)x`` may use in a condition.
_CAST_TYPES = {"int", "int64_t", "int32_t", "uint64_t", "size_t", "double", "float", "bool"}


class _Parser:
    """Recursive descent over a condition; ``subject`` maps an identifier to a parameter."""

    def __init__(self, text: str, subject: Mapping[str, str], constant: Resolver) -> None:
        self.toks = tokenize(text)
        self.i = 0
        self.subject = subject
        self.constant = constant

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.toks[j][1] if j < len(self.toks) else ""

    def take(self, want: str | None = None) -> str:
        if self.i >= len(self.toks):
            raise Unparsed("unexpected end")
        tok = self.toks[self.i][1]
        if want is not None and tok != want:
            raise Unparsed(f"expected {want!r}, got {tok!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.or_expr()
        if self.i != len(self.toks):
            raise Unparsed(f"trailing {self.peek()!r}")
        return node

    def or_expr(self) -> Node:
        items = [self.and_expr()]
        while self.peek() == "||":
            self.take()
            items.append(self.and_expr())
        return items[0] if len(items) == 1 else Node("or", tuple(items))

    def and_expr(self) -> Node:
        items = [self.unary()]
        while self.peek() == "&&":
            self.take()
            items.append(self.unary())
        return items[0] if len(items) == 1 else Node("and", tuple(items))

    def unary(self) -> Node:
        if self.peek() == "!":
            self.take()
            inner = self.unary()
            if inner.op == "atom" and inner.atom and inner.atom.op == "truth":
                return Node("atom", atom=Compare(inner.atom.left, "not"))
            raise Unparsed("negation of a compound condition")
        if self.peek() == "(" and self._is_group():
            self.take("(")
            node = self.or_expr()
            self.take(")")
            return node
        left = self.operand()
        if self.peek() in ("==", "!=", "<", "<=", ">", ">="):
            op = self.take()
            right = self.operand()
            return Node("atom", atom=Compare(left, op, right))
        return Node("atom", atom=Compare(left, "truth"))

    def _is_group(self) -> bool:
        """A parenthesis that groups a condition, not a C cast such as ``(int64_t)x``."""
        inner = self.peek(1)
        return not (inner in _CAST_TYPES and self.peek(2) == ")")

    def operand(self) -> Operand:
        start = self.i
        kind, tok = self.toks[self.i] if self.i < len(self.toks) else ("", "")
        if kind == "str":
            self.take()
            return Operand("literal", value=tok[1:-1].replace('\\"', '"').replace("\\\\", "\\"))
        if kind == "num":
            self.take()
            return Operand("literal", value=_number(tok))
        if tok == "-" and self.peek(1) and self.toks[self.i + 1][0] == "num":
            self.take()
            return Operand("literal", value=-_number(self.take()))  # type: ignore[operator]
        if tok == "static_cast" or (tok == "(" and not self._is_group()):
            return self._cast()
        path = self._path()
        text = "".join(t for _, t in self.toks[start : self.i])
        return self._classify(path, text)

    def _cast(self) -> Operand:
        """``static_cast<T>(x)`` or ``(T)x``: the value of ``x``."""
        if self.take() == "(":
            self.take()
            self.take(")")
            return self.operand()
        self.take("<")
        while self.peek() != ">":
            self.take()
        self.take(">")
        self.take("(")
        inner = self.operand()
        self.take(")")
        return inner

    def _path(self) -> list[str]:
        """``a::b.c(0).d()`` as parts: names, ``()`` / ``(k)`` calls and ``[k]`` indexes."""
        parts = [self.take()]
        while True:
            tok = self.peek()
            if tok == "::" or tok in (".", "->"):
                self.take()
                parts.append(self.take())
            elif tok == "(":
                self.take()
                args = []
                depth = 1
                while depth:
                    t = self.take()
                    depth += {"(": 1, ")": -1}.get(t, 0)
                    if depth:
                        args.append(t)
                parts.append("(" + "".join(args) + ")")
            elif tok == "[":
                self.take()
                idx = []
                while self.peek() != "]":
                    idx.append(self.take())
                self.take("]")
                parts.append("[" + "".join(idx) + "]")
            else:
                return parts

    def _classify(self, parts: list[str], text: str) -> Operand:
        head = parts[0]
        name = self.subject.get(head)
        if name is not None:
            rest = [p for p in parts[1:] if p not in ("value", "()")]
            if not rest:
                return Operand("value", name, text=text)
            if rest in (["dim"], ["ndimension"]) or rest[:2] == ["sizes", "size"]:
                return Operand("dim", name, text=text)
            if rest[0] == "size" and len(parts) > 2 and re.fullmatch(r"\(-?\d+\)", parts[2]):
                return Operand("size", name, index=int(parts[2][1:-1]), text=text)
            if rest[0] == "sizes" and len(rest) > 1 and re.fullmatch(r"\[-?\d+\]", rest[1]):
                return Operand("size", name, index=int(rest[1][1:-1]), text=text)
            if rest[0] in ("scalar_type", "dtype"):
                return Operand("dtype", name, text=text)
            if rest[0] in ("has_value", "defined"):
                return Operand("present", name, text=text)
            if rest[0] == "empty":
                return Operand("empty", name, text=text)
            return Operand("other", text=text)
        if parts[-1] in ("true", "false") and len(parts) == 1:
            return Operand("literal", value=parts[-1] == "true")
        dtype = _DTYPES.get(re.sub(r"^k", "", parts[-1]))
        if dtype and (parts[0] in ("at", "c10", "torch") or parts[-1].startswith("k")):
            return Operand("literal", value=dtype)
        if len(parts) <= 3 and all(re.fullmatch(r"\w+", p) for p in parts):
            value = self.constant("::".join(parts))
            if value is not None:
                return Operand("literal", value=value)
        return Operand("other", text=text)


def _number(tok: str) -> int | float:
    tok = tok.rstrip("uUlLfF")
    return float(tok) if any(c in tok for c in ".eE") else int(tok)


def parse_condition(text: str, subject: Mapping[str, str], constant: Resolver) -> Node:
    """The condition as a tree; raises :class:`Unparsed` on what is not modelled."""
    return _Parser(text, subject, constant).parse()


def conjuncts(node: Node) -> list[Node]:
    return list(node.items) if node.op == "and" else [node]


def _subject(c: Compare) -> tuple[str, str, int] | None:
    """(kind, param, index) the comparison is about, when one side is a literal."""
    if c.op in ("truth", "not"):
        if c.left.kind in ("value", "present", "empty"):
            return c.left.kind, c.left.param, 0
        return None
    sides = [c.left, c.right]
    lit = [s for s in sides if s is not None and s.kind == "literal"]
    sub = [
        s for s in sides if s is not None and s.kind in ("value", "dim", "size", "dtype", "present")
    ]
    if len(lit) == 1 and len(sub) == 1:
        return sub[0].kind, sub[0].param, sub[0].index
    return None


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _term(c: Compare) -> tuple[str, Literal | None]:
    """(op, literal) with the subject on the left."""
    if c.op == "truth":
        return "==", True
    if c.op == "not":
        return "==", False
    assert c.right is not None
    if c.left.kind == "literal":
        return _FLIP[c.op], c.left.value
    return c.op, c.right.value


def reduce(node: Node) -> Accepts | None:
    """What one conjunct accepts, when every comparison in it speaks of one subject.

    ``a == 1 || a == 2``, ``a >= 0 && a <= 6``, ``(a >= 0 && a < 5) || (a > 5 && a <= 8)``,
    ``x.dim() == 3``, ``flag`` and ``!flag`` reduce; anything mixing subjects does not.
    """
    terms = list(node.items) if node.op == "or" else [node]
    subject: tuple[str, str, int] | None = None
    out: Accepts | None = None
    for term in terms:
        atoms = [n.atom for n in conjuncts(term)]
        if any(a is None for a in atoms) or any(n.op == "or" for n in conjuncts(term)):
            return None
        lo: float | None = None
        hi: float | None = None
        lo_in = hi_in = True
        equal: list[Literal] = []
        excluded: list[Literal] = []
        for atom in atoms:
            assert atom is not None
            sub = _subject(atom)
            if sub is None or (subject is not None and sub != subject):
                return None
            subject = sub
            op, val = _term(atom)
            if op == "==":
                equal.append(val)  # type: ignore[arg-type]
            elif op == "!=":
                excluded.append(val)  # type: ignore[arg-type]
            elif isinstance(val, (int, float)) and not isinstance(val, bool):
                if op in (">", ">=") and (lo is None or val >= lo):
                    lo, lo_in = float(val), op == ">="
                elif op in ("<", "<=") and (hi is None or val <= hi):
                    hi, hi_in = float(val), op == "<="
            else:
                return None
        if out is None:
            assert subject is not None
            out = Accepts(subject[0], subject[1], subject[2])
        if len(equal) > 1 or (excluded and len(terms) > 1):
            return None  # a == 1 && a == 2, or a != 1 among alternatives: not modelled
        if equal:
            bounds = (lo, lo_in, hi, hi_in)
            if not _numeric(equal[0]) or _inside(float(equal[0]), bounds):  # type: ignore[arg-type]
                out.values.append(equal[0])
        elif lo is not None or hi is not None:
            out.intervals.append((lo, lo_in, hi, hi_in))
        out.excluded += excluded
    return out


def requirements(node: Node) -> list[Accepts | None]:
    """What a whole condition demands: one entry per independent requirement.

    The condition reduces as a whole when it speaks of one subject; otherwise its
    top-level conjuncts are taken apart, comparisons of one subject joined again
    (``trans && !is_cross && mode == 0`` is three requirements, ``k > 0 && k <= 1``
    one).  None stands for a requirement that could not be read.
    """
    whole = reduce(node)
    if whole is not None:
        return [whole]
    groups: dict[tuple[str, str, int], list[Node]] = {}
    out: list[Accepts | None] = []
    for part in conjuncts(node):
        sub = _subject(part.atom) if part.op == "atom" and part.atom else None
        if sub is None:
            out.append(reduce(part))
        else:
            groups.setdefault(sub, []).append(part)
    for nodes in groups.values():
        out.append(reduce(nodes[0] if len(nodes) == 1 else Node("and", tuple(nodes))))
    return out


#: ``const std::set<int> NAME{2, 4, 8};`` / ``static const std::vector<std::string> NAME = {…};``
_SET_CONST = re.compile(
    r"(?m)^\s*(?:(?:static|const|constexpr|inline)\s+)*std::(?:set|unordered_set|vector)\s*"
    r"<\s*[\w:]+\s*>\s+(\w+)\s*(?:=\s*)?\{([^{}]*)\}\s*;"
)
#: one member of such a literal: a number or a quoted string
_MEMBER = re.compile(r'^(?:"((?:[^"\\]|\\.)*)"|(-?\d+(?:\.\d+)?)[uUlLfF]*)$')
#: the element looked up: a name with member calls (``x``, ``x.dim()``, ``a.value()``)
_ELEM = r"[A-Za-z_][\w:]*(?:\s*(?:\.|->)\s*\w+(?:\s*\(\s*\))?)*"


def sets_in(text: str, constant: Resolver | None = None) -> dict[str, tuple[Literal, ...]]:
    """Literal sets a file defines (``std::set``/``unordered_set``/``vector`` of numbers or
    strings), by name; a set with a member that is neither a literal nor a named constant
    ``constant`` resolves is left out."""
    out: dict[str, tuple[Literal, ...]] = {}
    for m in _SET_CONST.finditer(text):
        items: list[Literal] = []
        for raw in (p.strip() for p in m.group(2).split(",")):
            if not raw:
                continue
            lit = _MEMBER.match(raw)
            if lit and lit.group(1) is not None:
                items.append(lit.group(1))
            elif lit:
                items.append(_number(lit.group(2)))
            elif (
                constant is not None and re.fullmatch(r"[\w:]+", raw) and constant(raw) is not None
            ):
                items.append(constant(raw))  # type: ignore[arg-type]
            else:
                break
        else:
            out.setdefault(m.group(1), tuple(items))
    return out


def _members(elem: str, values: tuple[Literal, ...], inside: bool) -> str:
    def lit(v: Literal) -> str:
        return (
            '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
            if isinstance(v, str)
            else str(v)
        )

    op, join = ("==", " || ") if inside else ("!=", " && ")
    return "(" + join.join(f"{elem} {op} {lit(v)}" for v in values) + ")"


def expand_membership(text: str, sets: Mapping[str, tuple[Literal, ...]]) -> str:
    """Membership tests against a known literal set, written out as comparisons.

    ``LIST.find(x) != LIST.end()``, ``std::find(LIST.begin(), LIST.end(), x) != LIST.end()``
    and ``LIST.count(x) > 0`` (or bare ``LIST.count(x)``) become ``(x == a || x == b …)``;
    the ``== end()`` / ``count(x) == 0`` forms become ``(x != a && x != b …)``, so the
    parser reads them like any other value check.  Sets it does not know stay as written.
    """
    for name, values in sets.items():
        if name not in text or not values:
            continue
        n = re.escape(name)
        end = rf"{n}\s*\.\s*c?end\s*\(\s*\)"
        forms = (
            rf"\b{n}\s*\.\s*find\s*\(\s*(?P<e>{_ELEM})\s*\)\s*(?P<op>!=|==)\s*{end}",
            rf"\bstd::find\s*\(\s*{n}\s*\.\s*c?begin\s*\(\s*\)\s*,\s*{end}\s*,\s*"
            rf"(?P<e>{_ELEM})\s*\)\s*(?P<op>!=|==)\s*{end}",
            rf"\b{n}\s*\.\s*count\s*\(\s*(?P<e>{_ELEM})\s*\)(?:\s*(?P<op>>|!=|==)\s*0\b)?",
        )

        def written(m: re.Match[str], members: tuple[Literal, ...] = values) -> str:
            inside = m.group("op") in (None, "!=", ">")
            return _members(" ".join(m.group("e").split()), members, inside)

        for form in forms:
            text = re.sub(form, written, text)
    return text
