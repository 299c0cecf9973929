"""What op-plugin's wrapper of an operator checks, branches on and drops.

The wrapper (``op_plugin/ops/opapi/*.cpp``, or ``op_plugin/ops/aclops/*.cpp`` for an
operator with no aclnn path) is what runs between a Python call and the kernel, so its
``TORCH_CHECK``s are the first source of truth about argument values.  For one operator
this module reads the wrapper function and the helpers of its own file it hands
arguments to, and returns:

* **checks** — every ``TORCH_CHECK`` condition, each conjunct reduced to what it accepts
  about one parameter (a value set, an interval, a rank, a size, a dtype) where
  :mod:`tools.upstream.cexpr` can read it, else kept as opaque text; a check inside an
  ``if``/``else``/loop is *conditional* and names its guard;
* **branches** — values of a parameter the wrapper tests in an ``if`` (PFA maps
  ``sparse_mode`` 10–14 to 0–4 with high precision): values a record may be missing;
* **ignored** — parameters an ``EXEC_NPU_CMD`` on some path does not receive (a
  ``group_list_type`` dropped on the older aclnn API).

Parameters are named by the operator's schema (C++ names map by position); locals
initialised from a parameter (``std::string s = std::string(layout)``,
``x.value_or(0)``) speak for it.  Nothing here is guessed: what is not read stays text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tools.upstream.cexpr import (
    Accepts,
    Literal,
    Resolver,
    Unparsed,
    expand_membership,
    parse_condition,
    reduce,
    requirements,
    sets_in,
)
from tools.upstream.ctext import close_paren, split_top, statements, string_end
from tools.upstream.kernel_links import Function, definitions, match_brace
from tools.upstream.kernels import strip_comments

#: Where wrappers live, in the order one is chosen: the aclnn path first, then the aclop
#: fallback, then op-plugin's ATB-backed operators.
WRAPPER_DIRS = (
    ("opapi", "op_plugin/ops/opapi"),
    ("aclops", "op_plugin/ops/aclops"),
    ("atb", "op_plugin/ops/atb"),
)
_CONST = re.compile(
    r"(?m)^\s*(?:static\s+|const\s+|constexpr\s+|inline\s+)+[\w:]+\s+(\w+)\s*=\s*"
    r"(?:static_cast<\w+>\()?(-?\d+(?:\.\d+)?)[uUlLfF]*\)?\s*;"
)
_DEFINE = re.compile(r"(?m)^\s*#\s*define\s+(\w+)\s+\(?(-?\d+(?:\.\d+)?)[uUlLfF]*\)?\s*$")
_ENUM = re.compile(r"\benum\s+(class\s+|struct\s+)?(\w+)\s*(?::\s*[\w:]+\s*)?\{([^}]*)\}")
_EXEC = re.compile(r"\bEXEC_NPU\w*\s*\(")
_CHECK = re.compile(r"\bTORCH_CHECK\s*\(")
_IF = re.compile(r"\bif\s*\(")
_DECL = re.compile(
    r"^(?:(?:const|static|constexpr|auto|unsigned)\s+)*(?:[\w:]+(?:<[^;=]*>)?)[\s&*]+(\w+)\s*=\s*(.+)$",
    re.S,
)
_UNWRAP = (
    re.compile(
        r"^(?:std::string|c10::string_view|std::string_view|at::IntArrayRef)\s*\((.*)\)$", re.S
    ),
    re.compile(r"^static_cast<[^>]*>\s*\((.*)\)$", re.S),
    re.compile(r"^\(\s*[\w:]+\s*\)\s*(.*)$", re.S),  # a C cast
    re.compile(r"^(.*?)\s*\.\s*(?:value|data|c_str|toLong|toDouble|toBool|vec)\s*\(\s*\)$", re.S),
    re.compile(r"^(.*?)\s*\.\s*(?:value_or|to)\s*(?:<[^>]*>)?\s*\(.*\)$", re.S),
)
#: what a wrapper asks to choose a path per chip or per CANN release
_PLATFORM = re.compile(r"GetSocVersion|IsAclnnOnly|check_aclnn_kernel_available|SocVersion::")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_NOT_HELPERS = {
    "TORCH_CHECK",
    "EXEC_NPU_CMD",
    "DO_COMPATIBILITY",
    "OPS_ERROR",
    "if",
    "for",
    "while",
    "switch",
    "return",
    "sizeof",
    "static_cast",
    "std",
    "at",
    "c10",
}


@dataclass
class Check:
    """One conjunct of a ``TORCH_CHECK``: what it accepts, where, and under which guard."""

    accepts: Accepts | None  # None: opaque (text only)
    text: str
    path: str
    line: int
    guard: str = ""  # "" when every call passes through it

    @property
    def conditional(self) -> bool:
        return bool(self.guard)


@dataclass
class Ignored:
    """A parameter one dispatch of the wrapper does not pass on."""

    param: str
    api: str
    path: str
    line: int
    guard: str
    #: the guard asks which chip or which aclnn version is there: the argument is dropped on
    #: some products, not for some argument values
    platform: bool = False


@dataclass
class WrapperFacts:
    op: str
    backend: str  # opapi | aclops | atb
    path: str
    first_line: int
    last_line: int
    params: list[str]
    checks: list[Check] = field(default_factory=list)
    branches: list[Check] = field(default_factory=list)
    ignored: list[Ignored] = field(default_factory=list)

    @property
    def lines(self) -> str:
        return f"{self.first_line}-{self.last_line}"


@dataclass
class Source:
    """One cleaned C++ file with its functions and the constants it defines."""

    path: str
    text: str
    functions: dict[str, list[Function]]
    constants: dict[str, Literal]
    #: literal sets it defines (``const std::set<int> SIZES{2, 4, 8};``), by name
    sets: dict[str, tuple[Literal, ...]] = field(default_factory=dict)


class WrapperTree:
    """op-plugin's wrapper sources (both backends), read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sources: dict[str, list[tuple[str, Function]]] = {}
        self.files: dict[str, Source] = {}
        self.shared: dict[str, Literal] = {}
        self.shared_sets: dict[str, tuple[Literal, ...]] = {}
        clashing: set[str] = set()
        for backend, rel in WRAPPER_DIRS:
            for path in sorted((root / rel).rglob("*.cpp")):
                self._add(path, backend)
        for header in sorted((root / "op_plugin").rglob("*.h")):
            text = strip_comments(header.read_text(encoding="utf-8", errors="replace"))
            for name, value in constants_in(text).items():
                if self.shared.setdefault(name, value) != value and "::" not in name:
                    clashing.add(name)  # headers disagree: the bare name says nothing
            for name, members in sets_in(text, self.shared.get).items():
                self.shared_sets.setdefault(name, members)
        for name in clashing:
            del self.shared[name]

    def _add(self, path: Path, backend: str) -> None:
        rel = path.relative_to(self.root).as_posix()
        text = strip_comments(path.read_text(encoding="utf-8", errors="replace"))
        consts = constants_in(text)
        src = Source(rel, text, definitions(text, rel), consts, sets_in(text, consts.get))
        self.files[rel] = src
        for name, fns in src.functions.items():
            for fn in fns:
                self.sources.setdefault(name, []).append((backend, fn))

    def wrapper(self, op: str, arity: int | None = None) -> tuple[str, Function] | None:
        """The function that runs for ``op``: the aclnn (opapi) one when there is one."""
        found = self.sources.get(op, []) + self.sources.get(f"{op}_symint", [])
        for backend, _ in WRAPPER_DIRS:
            cands = [(b, fn) for b, fn in found if b == backend]
            if arity is not None:
                exact = [c for c in cands if len(self.cpp_params(c[1])) == arity]
                cands = exact or cands
            if cands:
                return cands[0]
        return None

    def cpp_params(self, fn: Function) -> list[str]:
        text = self.files[fn.path].text
        open_at = text.index("(", fn.start)
        close = close_paren(text, open_at)
        names = []
        for part in split_top(text[open_at + 1 : close - 1]):
            decl = part.split("=", 1)[0].strip()
            m = re.search(r"(\w+)\s*(?:\[\s*\])?$", decl)
            if m and decl:
                names.append(m.group(1))
        return names

    def constant(self, path: str) -> Resolver:
        local = self.files[path].constants

        def resolve(name: str) -> Literal | None:
            for key in (name, name.split("::")[-1]):
                if key in local:
                    return local[key]
                if key in self.shared:
                    return self.shared[key]
            return None

        return resolve

    def sets(self, path: str) -> dict[str, tuple[Literal, ...]]:
        """The literal sets a condition in ``path`` can name (the file's, then headers')."""
        return {**self.shared_sets, **self.files[path].sets}

    def facts(self, op: str, schema_args: list[str]) -> WrapperFacts | None:
        """Checks, branches and dropped parameters of ``op``'s wrapper (None: no wrapper)."""
        found = self.wrapper(op, len(schema_args))
        if found is None:
            return None
        backend, fn = found
        cpp = self.cpp_params(fn)
        if len(cpp) == len(schema_args):
            mapping = dict(zip(cpp, schema_args, strict=True))
        else:
            mapping = {n: n for n in cpp if n in schema_args}
        out = WrapperFacts(
            op, backend, fn.path, fn.first_line, fn.last_line, list(mapping.values())
        )
        _Reader(self, out).function(fn, mapping, "", depth=2, seen=set())
        return out


def constants_in(text: str) -> dict[str, Literal]:
    """Named integer constants a file defines: ``const int X = 3;``, ``#define``, enums."""
    out: dict[str, Literal] = {}
    for rx in (_CONST, _DEFINE):
        for m in rx.finditer(text):
            num = m.group(2)
            out.setdefault(m.group(1), float(num) if "." in num else int(num))
    bare: dict[str, Literal] = {}
    clashing: set[str] = set()
    for m in _ENUM.finditer(text):
        value = -1
        # a plain enum's names are names of the enclosing scope: the struct it sits in
        # (``SelfAttentionParam::MASK_TYPE_NORM_COMPRESS``) or, at namespace level, bare
        scoped = bool(m.group(1))
        outer = _enclosing_struct(text, m.start())
        for item in m.group(3).split(","):
            name, _, given = item.partition("=")
            name = name.strip()
            if not re.fullmatch(r"\w+", name):
                continue
            given = given.strip()
            if given:
                if not re.fullmatch(r"-?\d+", given):
                    break
                value = int(given)
            else:
                value += 1
            out.setdefault(f"{m.group(2)}::{name}", value)
            if scoped:
                continue
            if outer:
                out.setdefault(f"{outer}::{name}", value)
            if bare.setdefault(name, value) != value:
                clashing.add(name)  # two structs' enums give it different values
    for name, known in bare.items():
        if name not in clashing:
            out.setdefault(name, known)
    return out


_STRUCT = re.compile(r"\b(?:struct|class)\s+(\w+)[^;{}()]*\{")


def _enclosing_struct(text: str, at: int) -> str:
    """The innermost ``struct``/``class`` whose body contains offset ``at`` ("" if none)."""
    found = ""
    for m in _STRUCT.finditer(text, 0, at):
        if match_brace(text, m.end() - 1) > at:
            found = m.group(1)
    return found


def squeeze(text: str) -> str:
    return " ".join(text.split())


def _ternary_value(text: str) -> str | None:
    """``x.has_value() ? A : B`` → ``A`` (the ``:`` of ``::`` is not the separator)."""
    m = re.match(r"^\w+\s*\.\s*has_value\s*\(\s*\)\s*\?", text)
    if m is None:
        return None
    depth = 0
    for i in range(m.end(), len(text)):
        c = text[i]
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == ":" and depth == 0 and text[i - 1] != ":" and text[i + 1 : i + 2] != ":":
            return text[m.end() : i].strip()
    return None


def alias_of(rhs: str, names: dict[str, str]) -> str | None:
    """The parameter a local's initialiser stands for, when it only unwraps one."""
    text = rhs.strip()
    for _ in range(6):
        middle = _ternary_value(text)
        if middle is not None:
            text = middle
            continue
        for rx in _UNWRAP:
            m = rx.match(text)
            if m:
                text = m.group(m.lastindex or 1).strip()
                break
        else:
            break
    return names.get(text) if re.fullmatch(r"\w+", text) else None


class _Reader:
    """Walks one function (and helpers of its file) collecting facts into ``out``."""

    def __init__(self, tree: WrapperTree, out: WrapperFacts) -> None:
        self.tree = tree
        self.out = out

    def function(
        self, fn: Function, names: dict[str, str], guard: str, depth: int, seen: set[int]
    ) -> None:
        seen.add(fn.start)
        src = self.tree.files[fn.path]
        body_at, body_end = fn.body
        body = src.text[body_at:body_end]
        names = dict(names)
        derived: dict[str, set[str]] = {}
        platform: set[str] = set()
        for _at, stmt in statements(body):
            m = _DECL.match(stmt)
            if m:
                var, rhs = m.group(1), m.group(2)
                if _PLATFORM.search(rhs):
                    platform.add(var)
                alias = alias_of(rhs, names)
                if alias:
                    names[var] = alias
                used = {names[w] for w in _IDENT.findall(rhs) if w in names}
                used |= {p for w in _IDENT.findall(rhs) for p in derived.get(w, ())}
                derived[var] = used
        resolve = self.tree.constant(fn.path)
        for at, args in _calls(body, _CHECK):
            where = _guard(body, at)
            cond = split_top(args)[0] if args.strip() else ""
            self._check(
                cond, names, resolve, fn.path, src.text, body_at + at, _join(guard, where), body, at
            )
        for at, cond in _if_headers(body):
            self._branch(cond, names, resolve, fn.path, src.text, body_at + at)
        self._ignored(body, body_at, names, derived, fn, guard, platform)
        if depth == 0:
            return
        for call in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", body):
            callee = call.group(1)
            if callee in _NOT_HELPERS or callee == self.out.op:
                continue
            for helper in src.functions.get(callee, []):
                if helper.start in seen or helper.start == fn.start:
                    continue
                given = split_top(body[call.end() : close_paren(body, call.end() - 1) - 1])
                params = self.tree.cpp_params(helper)
                if len(given) != len(params):
                    continue
                passed = {p: alias_of(a, names) for p, a in zip(params, given, strict=True)}
                mapped = {p: n for p, n in passed.items() if n}
                if mapped:
                    self.function(
                        helper, mapped, _join(guard, _guard(body, call.start())), depth - 1, seen
                    )

    def _check(
        self,
        cond: str,
        names: dict[str, str],
        resolve: Resolver,
        path: str,
        text: str,
        at: int,
        guard: str,
        body: str,
        local_at: int,
    ) -> None:
        line = text.count("\n", 0, at) + 1
        if cond.strip() == "false":
            union = _refusal_after_returns(body, local_at, names, resolve)
            if union is not None and not guard:
                self.out.checks.append(
                    Check(union, f"{union.param}: {union.describe()}", path, line)
                )
            return
        try:
            tree = parse_condition(expand_membership(cond, self.tree.sets(path)), names, resolve)
        except Unparsed:
            if any(n in _IDENT.findall(cond) for n in names):
                self.out.checks.append(Check(None, squeeze(cond), path, line, guard))
            return
        for acc in requirements(tree):
            if acc is not None or any(n in _IDENT.findall(cond) for n in names):
                self.out.checks.append(Check(acc, squeeze(cond), path, line, guard))

    def _branch(
        self, cond: str, names: dict[str, str], resolve: Resolver, path: str, text: str, at: int
    ) -> None:
        try:
            tree = parse_condition(expand_membership(cond, self.tree.sets(path)), names, resolve)
        except Unparsed:
            return
        for acc in requirements(tree):
            if acc is not None and acc.kind == "value":
                line = text.count("\n", 0, at) + 1
                self.out.branches.append(Check(acc, squeeze(cond), path, line))

    def _ignored(
        self,
        body: str,
        body_at: int,
        names: dict[str, str],
        derived: dict[str, set[str]],
        fn: Function,
        guard: str,
        platform: set[str],
    ) -> None:
        execs = []
        for at, args in _calls(body, _EXEC):
            words = _IDENT.findall(args)
            api = words[0] if words else "?"
            used = {names[w] for w in words if w in names}
            used |= {p for w in words for p in derived.get(w, ())}
            execs.append((at, api, used))
        if len(execs) < 2:
            return
        text = self.tree.files[fn.path].text
        for param in sorted(set(names.values())):
            if not any(param in used for _, _, used in execs):
                continue
            for at, api, used in execs:
                if param not in used:
                    line = text.count("\n", 0, body_at + at) + 1
                    where = _join(guard, _guard(body, at)) or "the other dispatch returned first"
                    on_chip = bool(_PLATFORM.search(where)) or any(
                        re.search(rf"\b{v}\b", where) for v in platform
                    )
                    self.out.ignored.append(Ignored(param, api, fn.path, line, where, on_chip))


def _join(outer: str, inner: str) -> str:
    return " / ".join(g for g in (outer, inner) if g)


def _calls(body: str, rx: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    for m in rx.finditer(body):
        end = close_paren(body, m.end() - 1)
        yield m.start(), body[m.end() : end - 1]


def _if_headers(body: str) -> Iterator[tuple[int, str]]:
    for m in _IF.finditer(body):
        end = close_paren(body, m.end() - 1)
        yield m.start(), body[m.end() : end - 1]


def _guard(body: str, at: int) -> str:
    """The ``if``/``else``/loop header governing offset ``at`` of a function body ("" if none).

    ``body`` starts with the function's own brace; a block opened inside it, or a
    statement that starts with ``if (...)`` / ``else``, makes what follows conditional.
    """
    stack: list[int] = []
    i = 0
    while i < at:
        c = body[i]
        if c == '"':
            i = string_end(body, i)
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            stack.pop()
        i += 1
    headers = []
    for open_at in stack[1:]:
        head = _header_before(body, open_at)
        if head:
            headers.append(head)
    stmt_start = max(body.rfind(";", 0, at), body.rfind("{", 0, at), body.rfind("}", 0, at)) + 1
    lead = body[stmt_start:at].strip()
    if re.match(r"^(?:else\b|if\s*\(|for\s*\(|while\s*\()", lead):
        headers.append(squeeze(lead))
    return " / ".join(headers)


def _header_before(body: str, open_at: int) -> str:
    start = max(
        body.rfind(";", 0, open_at), body.rfind("{", 0, open_at), body.rfind("}", 0, open_at)
    )
    head = squeeze(body[start + 1 : open_at])
    if re.match(r"^(?:else\b|if\s*\(|for\s*\(|while\s*\(|switch\s*\(|case\b|do\b)", head):
        return head
    if re.search(r"\[[^\]]*\]\s*\([^)]*\)\s*(?:->\s*[\w:<>]+\s*)?$", head):
        return "lambda"
    return ""


def _refusal_after_returns(
    body: str, at: int, names: dict[str, str], resolve: Resolver
) -> Accepts | None:
    """``if (m == "a") return 0; if (m == "b") return 1; TORCH_CHECK(false, …)``: {a, b}."""
    union: Accepts | None = None
    for if_at, cond in _if_headers(body[:at]):
        if _guard(body, if_at):
            continue
        end = close_paren(body, body.index("(", if_at))
        rest = body[end:at].lstrip()
        block = rest[: match_brace(rest, 0)] if rest.startswith("{") else rest.split(";", 1)[0]
        if "return" not in block:
            continue
        try:
            acc = reduce(parse_condition(cond, names, resolve))
        except Unparsed:
            return None
        if acc is None or acc.kind != "value" or acc.intervals or acc.excluded:
            return None
        if union is None:
            union = acc
        elif (union.kind, union.param) != (acc.kind, acc.param):
            return None
        else:
            union.values += [v for v in acc.values if v not in union.values]
    return union
