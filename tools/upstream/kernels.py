"""Read kernel registrations (``op_host/*_def.cpp`` of hicann/ops-transformer and ops-nn).

A registration is a C++ class deriving from ``OpDef``: its constructor declares inputs
(``this->Input("x").DataType({ge::DT_FLOAT16, ...}).Format({...})``) and the SoCs the
kernel is compiled for (``this->AICore().AddConfig("ascend910b"[, cfg])``), optionally
with per-SoC ``OpAICoreConfig`` objects that redeclare inputs.  ``OP_ADD(Name)`` names
the op type.  This module reads that text in one pass: it strips comments, splits the
class bodies into statements and matches each statement against the few shapes above.
A statement of one of these kinds that it cannot read (a SoC name held in a variable, a
dtype list built elsewhere, a preprocessor conditional) is reported in ``unreadable``
by file, line and kind (never by quoting the statement); nothing is guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CLASS = re.compile(r"\bclass\s+(\w+)\s*(?:final\s*)?:\s*public\s+(?:ops::)?OpDef\b")
_OP_ADD = re.compile(r"\bOP_ADD\(\s*(\w+)\s*[,)]")
#: ``std::vector<ge::DataType> name = {...}`` (or ``name{...}``): a named literal list
_NAMED_LIST = re.compile(
    r"std::vector\s*<\s*(?:ge::)?(?:DataType|Format)\s*>\s*(\w+)\s*=?\s*(\{\s*\{[^{}]*\}\s*\}|\{[^{}]*\})"
)
_DECL = re.compile(r"^\s*OpAICoreConfig\s+(\w+)\s*(?:;|$|=|\(|\{)")
_TENSOR = re.compile(r"^\s*(this\s*->\s*|(\w+)\s*\.\s*)(Input|Output)\s*\(\s*\"(\w+)\"\s*\)")
_ADD = re.compile(r"AddConfig\s*\(")
_ADD_LITERAL = re.compile(r"AddConfig\s*\(\s*\"(\w+)\"\s*(?:,\s*(\w+)\s*)?\)")
_ENTRY = re.compile(r"^(?:ge::)?(?:DT_|FORMAT_)(\w+)$")


@dataclass
class Tensor:
    """One declared input or output: dtype and format lists as written (combinations are
    by position); ``None`` when the declaration has no literal list."""

    name: str
    io: str
    dtypes: list[str] | None = None
    formats: list[str] | None = None


@dataclass
class KernelDef:
    """One ``OpDef`` class of a ``*_def.cpp`` file."""

    op_type: str
    path: str
    first_line: int
    last_line: int
    tensors: list[Tensor] = field(default_factory=list)
    #: SoC name → the config object it was added with ("" for none: the class's own tensors)
    socs: dict[str, str] = field(default_factory=dict)
    #: config object → its own tensor declarations (they replace the class's)
    configs: dict[str, list[Tensor]] = field(default_factory=dict)
    #: SoC name → its config's declarations as they stood when the SoC was added: one
    #: object is often added, redeclared and added again for another chip
    added: dict[str, list[Tensor]] = field(default_factory=dict)
    #: config objects handed to code this reader does not follow (their tensors are unknown)
    opaque: set[str] = field(default_factory=set)
    unreadable: list[str] = field(default_factory=list)
    #: the class body holds preprocessor lines: what is compiled depends on the build
    conditional: bool = False

    @property
    def lines(self) -> str:
        return f"{self.first_line}-{self.last_line}"

    def tensors_for(self, soc: str) -> list[Tensor] | None:
        """The tensor declarations that hold on ``soc``: its config's, else the class's;
        None when the config was built by code this reader does not follow."""
        cfg = self.socs.get(soc, "")
        if cfg in self.opaque:
            return None
        own = self.added.get(soc, self.configs.get(cfg, []))
        return own if own else self.tensors


def strip_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments (newlines kept, so offsets keep their line)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _statements(body: str, offset: int) -> list[tuple[int, str]]:
    """Split at ``;``, ``{`` and ``}`` outside parentheses: (start offset, statement)."""
    out: list[tuple[int, str]] = []
    depth, start = 0, 0
    for i, c in enumerate(body):
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and c in ";{}":
            stmt = body[start:i]
            if stmt.strip():
                lead = len(stmt) - len(stmt.lstrip())
                out.append((offset + start + lead, stmt.strip()))
            start = i + 1
    return out


def _call_args(stmt: str, method: str) -> str | None:
    """The argument text of ``.method(...)`` in a chained statement (first occurrence)."""
    m = re.search(r"\.\s*" + method + r"\s*\(", stmt)
    if m is None:
        return None
    depth, i = 1, m.end()
    while i < len(stmt) and depth:
        depth += {"(": 1, ")": -1}.get(stmt[i], 0)
        i += 1
    return stmt[m.end() : i - 1]


def _literal_list(args: str) -> list[str] | None:
    """``{ge::DT_FLOAT16, ge::DT_BF16}`` → ``["FLOAT16", "BF16"]``; None if not literal."""
    inner = args.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        return None
    if inner[1:].lstrip().startswith("{"):  # ``{{...}}``: a vector brace-initialised twice
        inner = inner[1:-1].strip()
    out = []
    for part in inner[1:-1].split(","):
        m = _ENTRY.match(part.strip())
        if part.strip() == "":
            continue
        if m is None:
            return None
        out.append(m.group(1))
    return out


def named_lists(clean: str) -> dict[str, list[str] | None]:
    """File-level and local ``std::vector<ge::DataType|Format>`` literals by name (None when
    a name is defined twice with different values: which one holds is not read)."""
    out: dict[str, list[str] | None] = {}
    for m in _NAMED_LIST.finditer(clean):
        values = _literal_list(m.group(2))
        name = m.group(1)
        out[name] = values if name not in out or out[name] == values else None
    return out


def _tensor(
    stmt: str,
    io: str,
    name: str,
    where: str,
    problems: list[str],
    named: dict[str, list[str] | None],
) -> Tensor:
    t = Tensor(name, io.lower())
    for method, attr in (("DataType", "dtypes"), ("Format", "formats")):
        args = _call_args(stmt, method)
        if args is None:
            args = _call_args(stmt, method + "List")
        if args is None:
            continue
        values = _literal_list(args)
        if values is None and args.strip() in named:
            values = named[args.strip()]
        if values is None:
            problems.append(f"{where}: {io} {name!r}: {method} is not a literal list")
        setattr(t, attr, values)
    return t


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def parse_def(text: str, path: str) -> list[KernelDef]:
    """Every ``OpDef`` class of one ``*_def.cpp`` text, with its op type from ``OP_ADD``."""
    clean = strip_comments(text)
    adds = {m.group(1): m for m in _OP_ADD.finditer(clean)}
    classes = list(_CLASS.finditer(clean))
    out: list[KernelDef] = []
    for k, cm in enumerate(classes):
        name = cm.group(1)
        end = classes[k + 1].start() if k + 1 < len(classes) else len(clean)
        add = adds.get(name)
        last = add.end() if add is not None and add.start() >= cm.start() else end
        kd = KernelDef(name, path, _line(clean, cm.start()), _line(clean, last))
        if add is None:
            kd.unreadable.append(f"{path}:{kd.first_line}: class {name} has no OP_ADD({name})")
        _read_body(clean, cm.end(), min(end, last), kd, named_lists(clean))
        out.append(kd)
    return out


def _read_body(
    clean: str, start: int, end: int, kd: KernelDef, named: dict[str, list[str] | None]
) -> None:
    body = clean[start:end]
    configs: set[str] = set()
    for pos, stmt in _statements(body, start):
        where = f"{kd.path}:{_line(clean, pos)}"
        for raw in stmt.splitlines():
            if raw.strip().startswith("#"):
                kd.conditional = True
                kd.unreadable.append(f"{where}: preprocessor line")
        stmt = "\n".join(s for s in stmt.splitlines() if not s.strip().startswith("#"))
        decl = _DECL.match(stmt)
        if decl:
            configs.add(decl.group(1))
            kd.configs.setdefault(decl.group(1), [])
            if stmt[decl.end() - 1 : decl.end()] in ("=", "(", "{"):
                kd.opaque.add(decl.group(1))
                kd.unreadable.append(
                    f"{where}: config {decl.group(1)} initialised by code not read"
                )
            continue
        tm = _TENSOR.match(stmt)
        if tm:
            owner = tm.group(2) or ""
            t = _tensor(stmt, tm.group(3), tm.group(4), where, kd.unreadable, named)
            if owner == "":
                kd.tensors.append(t)
            elif owner in configs:
                live = kd.configs[owner]
                same = [i for i, x in enumerate(live) if (x.io, x.name) == (t.io, t.name)]
                if same:  # a second declaration of the same tensor replaces the first
                    live[same[0]] = t
                else:
                    live.append(t)
            else:
                kd.unreadable.append(f"{where}: {tm.group(3)} declared on unknown object {owner!r}")
            continue
        if _ADD.search(stmt):
            lit = _ADD_LITERAL.search(stmt)
            if lit is None:
                kd.unreadable.append(f"{where}: AddConfig without a literal SoC name")
                continue
            soc, cfg = lit.group(1), lit.group(2) or ""
            if cfg and cfg not in configs:
                kd.unreadable.append(f"{where}: AddConfig({soc!r}) with unknown config {cfg!r}")
            kd.socs[soc] = cfg
            kd.added[soc] = list(kd.configs.get(cfg, [])) if cfg else []
        elif any(
            re.search(rf"\b{c}\b", stmt) and not re.match(rf"{c}\s*\.", stmt) for c in configs
        ):
            used = [c for c in configs if re.search(rf"\b{c}\b", stmt)]
            kd.opaque.update(used)
            kd.unreadable.append(f"{where}: config {', '.join(sorted(used))} used by code not read")
        elif re.search(r"\b(?:Input|Output)\s*\(", stmt) and "Attr" not in stmt:
            kd.unreadable.append(f"{where}: tensor declaration not read")
