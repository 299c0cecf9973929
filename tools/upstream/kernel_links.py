"""Link a torch_npu operator to its kernel registration through the aclnn API it calls.

op-plugin's wrapper for ``npu_x`` is the authority on which kernel runs: a C++ function
``npu_x(...)`` in ``op_plugin/ops/opapi/*.cpp`` whose body dispatches with
``EXEC_NPU_CMD(aclnnXxx, ...)`` (or one of its variants), or a generated wrapper whose
``op_plugin_functions.yaml`` entry says ``exec: aclnnXxx``.  In ops-transformer and
ops-nn every aclnn API lives in the directory of the operator it launches (its
``docs/aclnnXxx.md`` page, its ``op_host/op_api`` source), next to that operator's
``op_host/*_def.cpp`` registration.  So the chain record → wrapper → aclnn name → operator
directory → registration is read from files, never from a resemblance of names.

A wrapper body that branches on ``GetSocVersion()`` decides per product which path
runs; such a wrapper is flagged (``gated``) so that its kernel's SoC list is not read
as the operator's support.  The one shape read exactly is a plain refusal,
``TORCH_CHECK(GetSocVersion() != SocVersion::X, ...)``: the wrapper runs everywhere
but on X (``refuses``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tools.upstream.ctext import close_bracket
from tools.upstream.kernels import strip_comments

_EXEC = re.compile(r"\bEXEC_NPU\w*\(\s*(aclnn\w+)")
_SOC = re.compile(r"\bGetSocVersion\s*\(")
#: ``TORCH_CHECK(c10_npu::GetSocVersion() != c10_npu::SocVersion::X, ...)``: the wrapper
#: refuses one SoC and branches on nothing else
_REFUSAL = re.compile(
    r"\bTORCH_CHECK\s*\(\s*(?:c10_npu::)?GetSocVersion\s*\(\s*\)\s*!=\s*"
    r"(?:c10_npu::)?SocVersion::(\w+)\s*,"
)
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_GEN_FUNC = re.compile(r"^\s*-\s*func:\s*([A-Za-z_]\w*)[.(]")
_GEN_EXEC = re.compile(r"^\s*exec:\s*(aclnn\w+)")
_ACLNN_DEF = re.compile(r"\baclnnStatus\s+(aclnn\w+?)(?:GetWorkspaceSize)?\s*\(")
_ACLNN_DOC = re.compile(r"^(aclnn\w+)\.md$")


@dataclass
class Link:
    """One aclnn API a wrapper calls, and where the call is written."""

    aclnn: str
    path: str
    first_line: int
    last_line: int
    gated: bool = False
    #: c10_npu::SocVersion names the wrapper refuses with a TORCH_CHECK (and nothing else)
    refuses: list[str] = field(default_factory=list)

    @property
    def lines(self) -> str:
        return f"{self.first_line}-{self.last_line}"


@dataclass
class Function:
    path: str
    start: int  # offset of the name
    body: tuple[int, int]  # offsets of the braces
    first_line: int
    last_line: int


def match_brace(text: str, i: int) -> int:
    """Offset just after the brace closing the one at ``i`` (strings skipped)."""
    return close_bracket(text, i)


def definitions(clean: str, path: str) -> dict[str, list[Function]]:
    """Function definitions by name: a line that starts with a return type and the name, whose parameter list is followed by a body."""
    out: dict[str, list[Function]] = {}
    for m in re.finditer(r"(?m)^[ \t]*[A-Za-z_][^\n;{}()=]*?\b([A-Za-z_]\w*)\s*\(", clean):
        depth, i = 1, m.end()
        while i < len(clean) and depth:
            depth += {"(": 1, ")": -1}.get(clean[i], 0)
            i += 1
        rest = clean[i : i + 200].lstrip()
        rest = re.sub(r"^(?:const\b|noexcept\b|->\s*[\w:<>, ]+)\s*", "", rest)
        if not rest.startswith("{"):
            continue
        open_at = clean.index("{", i)
        close = match_brace(clean, open_at)
        line = clean.count("\n", 0, m.start()) + 1
        out.setdefault(m.group(1), []).append(
            Function(
                path, m.start(1), (open_at, close), line, line + clean.count("\n", m.start(), close)
            )
        )
    return out


@dataclass
class WrapperIndex:
    """Every wrapper function of op-plugin's ``opapi`` sources and generated entries."""

    texts: dict[str, str] = field(default_factory=dict)
    functions: dict[str, list[Function]] = field(default_factory=dict)
    generated: dict[str, list[Link]] = field(default_factory=dict)

    def links(self, api: str) -> list[Link]:
        """The aclnn APIs the wrapper of ``api`` calls (following helpers of its own file).

        op-plugin names the wrapper of a schema with SymInt arguments ``<api>_symint``.
        """
        out: list[Link] = list(self.generated.get(api, []))
        for fn in self.functions.get(api, []) + self.functions.get(f"{api}_symint", []):
            out += self._calls(fn, depth=2, seen=set())
        unique: dict[tuple[str, str, int], Link] = {}
        for link in out:
            unique.setdefault((link.aclnn, link.path, link.first_line), link)
        return list(unique.values())

    def _calls(self, fn: Function, depth: int, seen: set[int]) -> list[Link]:
        seen.add(fn.start)
        text = self.texts[fn.path]
        body = text[fn.body[0] : fn.body[1]]
        refuses = [m.group(1) for m in _REFUSAL.finditer(body)]
        gated = len(_SOC.findall(body)) > len(refuses)
        found = [
            Link(m.group(1), fn.path, fn.first_line, fn.last_line, gated, list(refuses))
            for m in _EXEC.finditer(body)
        ]
        if found or depth == 0:
            return found
        for m in _CALL.finditer(body):
            for helper in self.functions.get(m.group(1), []):
                if helper.path == fn.path and helper.start not in seen:
                    for link in self._calls(helper, depth - 1, seen):
                        link.gated = link.gated or gated
                        link.refuses = sorted({*link.refuses, *refuses})
                        found.append(link)
        return found


def load_wrappers(op_plugin: Path) -> WrapperIndex:
    """Read ``op_plugin/ops/opapi/*.cpp`` and ``op_plugin_functions.yaml``'s ``exec`` keys."""
    index = WrapperIndex()
    for path in sorted((op_plugin / "op_plugin" / "ops" / "opapi").glob("*.cpp")):
        rel = path.relative_to(op_plugin).as_posix()
        clean = strip_comments(path.read_text(encoding="utf-8", errors="replace"))
        index.texts[rel] = clean
        for name, fns in definitions(clean, rel).items():
            index.functions.setdefault(name, []).extend(fns)
    config = op_plugin / "op_plugin" / "config" / "op_plugin_functions.yaml"
    if config.is_file():
        rel = config.relative_to(op_plugin).as_posix()
        func, func_line = None, 0
        for n, line in enumerate(config.read_text(encoding="utf-8").splitlines(), 1):
            fm = _GEN_FUNC.match(line)
            if fm:
                func, func_line = fm.group(1), n
                continue
            em = _GEN_EXEC.match(line)
            if em and func:
                index.generated.setdefault(func, []).append(Link(em.group(1), rel, func_line, n))
    return index


def aclnn_directories(root: Path) -> dict[str, dict[str, str]]:
    """aclnn API name → {operator directory (relative): ``source`` or ``doc``}: the
    directories whose ``op_host/op_api`` sources define it or whose ``docs`` page is it."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if "tests" in parts or not path.is_file():
            continue
        if "docs" in parts:
            dm = _ACLNN_DOC.match(path.name)
            if dm:
                opdir = "/".join(parts[: parts.index("docs")])
                out.setdefault(dm.group(1), {}).setdefault(opdir, "doc")
            continue
        if "op_api" in parts and path.suffix in (".cpp", ".h"):  # op_host/op_api or op_api
            cut = parts.index("op_host") if "op_host" in parts else parts.index("op_api")
            opdir = "/".join(parts[:cut])
            text = path.read_text(encoding="utf-8", errors="replace")
            for m in _ACLNN_DEF.finditer(text):
                out.setdefault(m.group(1), {})[opdir] = "source"
    return out


def operator_directory(found: dict[str, str]) -> str | None:
    """The one directory an aclnn API belongs to: a defining source beats a docs page,
    a released directory beats ``experimental/``; None when that still leaves several."""
    sources = {d: k for d, k in found.items() if k == "source"}
    found = sources or found
    released = {d: k for d, k in found.items() if not d.startswith("experimental/")}
    found = released or found
    return next(iter(found)) if len(found) == 1 else None
