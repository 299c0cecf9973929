"""Ports across files: the package modules that hold planned stages of the classes a
ported file builds are ported with it, written beside it, and imported by the port.

A model file often builds its layers from classes of other files of its package (a
diffusers transformer: ``Attention`` and its processors, ``FeedForward``, the adaLN
norms).  ``kb port FILE`` follows the names FILE's classes use (``__init__``,
``forward``, ``__call__`` and the methods they call) through the package's imports,
ports each package file that holds a planned stage of a class so reached (only those
classes and functions are rewritten), and every file on the import path to it, and
rewrites the ported files' imports of those modules into
``_kb_port_module(MODULE, FILE)``: the ported copy written beside the port, loaded as a
sibling of its original (``<module>__kb_port``) so its own imports resolve in the
package, while the original keeps importing the originals in the same process.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import libcst as cst

from kb.port.package import Graph, module_file
from kb.port.rewrite import Porter
from kb.port.spans import Stage

LOADER = "_kb_port_module"
_LOADER_CODE = '''

def _kb_port_module(name, filename):
    """The ported copy (``filename``, written beside this file) of the package module
    ``name`` (as this file imports it), loaded as a sibling of its original."""
    import importlib.util
    import os
    import sys

    target = importlib.util.resolve_name(name, __package__) + "__kb_port"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    mod = sys.modules.get(target)
    if mod is None or os.path.abspath(getattr(mod, "__file__", "")) != path:
        spec = importlib.util.spec_from_file_location(target, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[target] = mod
        spec.loader.exec_module(mod)
    globals().setdefault("KB_PORT_MODULES", []).append(mod)
    return mod
'''


class _Only(Porter):
    """The rewrite pass over the definitions of a file a port reaches (the rest kept)."""

    def __init__(self, stages: list[Stage], notes: dict[str, list[str]], keep: set[str]) -> None:
        super().__init__(stages, notes)
        self.keep = keep
        self.depth = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:  # type: ignore[override]
        self.depth += 1
        if self.depth == 1 and node.name.value not in self.keep:
            return False
        super().visit_ClassDef(node)
        return True

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> Any:
        self.depth -= 1
        if self.depth == 0 and original.name.value not in self.keep:
            return updated
        return super().leave_ClassDef(original, updated)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:  # type: ignore[override]
        if not self.cls and not self.fn and node.name.value not in self.keep:
            return False
        super().visit_FunctionDef(node)
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
        if not self.cls and not self.fn and original.name.value not in self.keep:
            return updated
        return super().leave_FunctionDef(original, updated)


def rewrite_only(
    text: str, stages: list[Stage], notes: dict[str, list[str]], keep: set[str]
) -> tuple[str, Any]:
    """:func:`kb.port.rewrite.rewrite` limited to the definitions ``keep`` names."""
    from libcst.metadata import MetadataWrapper

    porter = _Only(stages, notes, keep)
    tree = MetadataWrapper(cst.parse_module(text)).visit(porter)
    return tree.code, porter.result


def unique_ids(text: str, result: Any, taken: set[str], prefix: str) -> str:
    """Stage ids another ported file already uses get ``prefix:`` in front (in the text
    and in the result); the ids kept are added to ``taken``."""
    renamed: dict[str, str] = {}
    for sid in list(result.stages):
        if sid in taken:
            new = f"{prefix}:{sid}"
            renamed[sid] = new
            result.stages[new] = result.stages.pop(sid)
    for old, new in renamed.items():
        text = re.sub(rf"_kb_stage\(\s*{re.escape(repr(old))}", f"_kb_stage({new!r}", text)
    taken.update(result.stages)
    return text


class _Redirect(cst.CSTTransformer):
    """``from M import a, b as c`` of a ported module M -> names read off its port."""

    def __init__(self, graph: Graph, path: Path, files: dict[Path, str]) -> None:
        super().__init__()
        self.graph, self.path, self.files = graph, path, files
        self.count = 0

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> Any:
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.ImportFrom):
            return updated
        imp = updated.body[0]
        if isinstance(imp.names, cst.ImportStar):
            return updated
        module = cst.Module([]).code_for_node(imp.module) if imp.module else ""
        level = len(imp.relative)
        src = module_file(self.path, self.graph.root, module, level)
        if src is None or src not in self.files:
            return updated
        spelled = "." * level + module
        lines = []
        for a in imp.names:
            local = cst.Module([]).code_for_node(a.asname.name if a.asname else a.name)
            name = cst.Module([]).code_for_node(a.name)
            lines.append(
                cst.parse_statement(
                    f"{local} = {LOADER}({spelled!r}, {self.files[src]!r}).{name}"
                    "  # kb port: the ported copy\n"
                )
            )
        self.count += 1
        lines[0] = lines[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel(lines)


def redirect(text: str, graph: Graph, path: Path, files: dict[Path, str]) -> str:
    """``text`` (the port of ``path``) importing the ported copies of ``files`` (original
    file -> the port's file name beside it), with the loader after its leading block."""
    module = cst.parse_module(text)
    change = _Redirect(graph, path, files)
    module = module.visit(change)
    if not change.count:
        return text
    body = list(module.body)
    at = 0
    for i, st in enumerate(body):
        small = st.body if isinstance(st, cst.SimpleStatementLine) else []
        doc = i == 0 and len(small) == 1 and isinstance(small[0], cst.Expr)
        future = any(
            isinstance(s, cst.ImportFrom)
            and isinstance(s.module, cst.Name)
            and s.module.value == "__future__"
            for s in small
        )
        if not (doc or future):
            break
        at = i + 1
    loader = list(cst.parse_module(_LOADER_CODE).body)
    loader[0] = loader[0].with_changes(
        leading_lines=[
            cst.EmptyLine(),
            cst.EmptyLine(
                comment=cst.Comment(
                    "# --- kb port: the package files this file imports, ported beside it"
                )
            ),
        ]
    )
    if at < len(body):  # the file's own code after two blank lines
        nxt = body[at]
        blank = sum(1 for e in nxt.leading_lines if e.comment is None)
        more = [cst.EmptyLine()] * max(0, 2 - blank)
        body[at] = nxt.with_changes(leading_lines=[*more, *nxt.leading_lines])
    body[at:at] = loader
    return module.with_changes(body=body).code


#: a stage computed inside another of the same class when that one is rewritten
COVERED = {"layer_norm": "adaln_layer_norm"}


def drop_stale(text: str, result: Any, notes: dict[str, list[str]]) -> str:
    """Notes that a class's stage was not rewritten, when a span elsewhere computed it
    after all (the processor an attention module calls, a helper function defined further
    down the file): dropped from the notes and from the comments above that class only."""
    for name, lines in notes.items():
        for line in list(lines):
            if "not rewritten:" not in line:
                continue
            if not any(m == name and line.startswith(f"stage {p} (") for m, p in result.done):
                continue
            lines.remove(line)
            text = _drop_comment(text, name, f"# kb port: {line}")
    return text


def _drop_comment(text: str, cls: str, comment: str) -> str:
    """``comment`` removed from the comment lines right above ``class cls``."""
    rows = text.splitlines(keepends=True)
    at = next((i for i, r in enumerate(rows) if r.lstrip().startswith(f"class {cls}")), -1)
    i = at - 1
    while i >= 0 and rows[i].lstrip().startswith(("#", "@")):
        if rows[i].strip() == comment:
            del rows[i]
        i -= 1
    return "".join(rows)


def covered_by_built(done: list[Any], graph: Graph) -> None:
    """A stage a class's note says was not rewritten, computed by a class it builds whose
    own stage of that mapping was (a q/k norm module): the note says which, in the notes
    and in the ported text (``done``: file, target, text, ported text, result, notes)."""
    ported = {m for *_, result, _ in done if result is not None for m in result.done}
    for i, (f, target, text, new, result, notes) in enumerate(done):
        for name, lines in notes.items():
            built = {n for _, n in graph.uses(f.resolve(), name)}
            for k, line in enumerate(lines):
                mapping = line.split(" ", 2)[1] if line.startswith("stage ") else ""
                by = sorted(n for n in built if (n, mapping) in ported)
                if "not rewritten:" not in line or not by:
                    continue
                said = f"stage {mapping} is computed by the ported {', '.join(by)} (its own stage)"
                lines[k] = said
                new = new.replace(f"# kb port: {line}\n", f"# kb port: {said}\n")
        # the same note twice (two reasons it was not found) now says one thing once
        for name in notes:
            notes[name] = list(dict.fromkeys(notes[name]))
        done[i] = (f, target, text, _dedupe_comments(new), result, notes)


def _dedupe_comments(text: str) -> str:
    """Consecutive identical ``# kb port:`` comment lines kept once."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        if out and line == out[-1] and line.lstrip().startswith("# kb port: "):
            continue
        out.append(line)
    return "".join(out)
