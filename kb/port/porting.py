"""``kb port``: the plan of each file, rewritten into its fused port.

The plan is ``kb scan --plan``'s (same options, same reader); this module turns its
stages into :class:`kb.port.spans.Stage` values, rewrites each planned file
(:mod:`kb.port.rewrite`), adds the prelude (:mod:`kb.port.prelude`) and writes the
result, copying the files it does not change so the port's own imports resolve.
"""

from __future__ import annotations

import difflib
import re
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kb.port import norms
from kb.port.spans import Stage

#: prerequisites a port can do in code (and how it does them)
DONE_IN_CODE = {
    "merged-gate-up": "the gate and up weights concatenated once at first use (KB_WEIGHT_MAP)",
    "rope-precompute": "cos/sin passed to the kernel as the module computes them",
    **norms.DONE,
}
_PROVEN_LINE = re.compile(r":(\d+)\b")


class PortError(Exception):
    """Input kb port cannot use (the message says which and why)."""


@dataclass
class FilePort:
    """One rewritten file."""

    source: str
    target: str
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    weights: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    diff: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "stages": self.stages,
            "weights": self.weights,
            "notes": self.notes,
        }


def plan_of(
    paths: list[str], options: Any, within: str | None = None
) -> tuple[list[dict[str, Any]], list[Any]]:
    """(plan entries, inventory) of ``kb scan --plan`` on ``paths``; ``within`` keeps the
    reader's imports and configs inside that folder (the MCP server's root)."""
    from kb.rules import RULES
    from kb.scan.engine import Scanner

    report = Scanner(None, options, rules=RULES).scan(paths, within=within)
    return list(report.plan), list(report.inventory)


def stages_and_notes(
    plan: list[dict[str, Any]], inventory: list[Any]
) -> dict[str, tuple[list[Stage], dict[str, list[str]]]]:
    """Per file: the stages to rewrite and the notes per class (held stages, stages and
    prerequisites the port cannot write, facts the plan left unknown)."""
    out: dict[str, tuple[list[Stage], dict[str, list[str]]]] = {}
    facts = {(m.file, m.name): m for m in inventory}
    seen: set[tuple[str, str, str]] = set()
    for entry in plan:
        file, name = str(entry.get("file", "")), str(entry.get("module", ""))
        stages, notes = out.setdefault(file, ([], {}))
        mod = facts.get((file, name))
        mfacts = dict(mod.facts) if mod is not None else {}
        glu = _PROVEN_LINE.search(mod.proven.get("glu", "")) if mod is not None else None
        for st in entry.get("stages") or []:
            key = (file, name, str(st.get("mapping", "")))
            if key in seen:
                continue
            seen.add(key)
            if st.get("held"):
                attention = str(st.get("mapping", "")).startswith("attention_")
                if not (attention and "causal" in mfacts):
                    notes.setdefault(name, []).append(
                        f"stage {st.get('stage')} ({st.get('operator')}) held by the plan: "
                        f"{st['held']}"
                    )
                    continue
                notes.setdefault(name, []).append(
                    f"stage {st.get('stage')}: the plan fixed no mask arguments; the port "
                    f"passes the mask its row names for causal={mfacts['causal']!r} "
                    "(kb verify checks it)"
                )
            if not st.get("mapping"):
                continue
            stages.append(
                Stage(
                    name,
                    str(entry.get("kind", "")),
                    str(st["mapping"]),
                    str(st.get("operator", "")),
                    dict(st.get("args") or {}),
                    mfacts,
                    int(glu.group(1)) if glu else 0,
                )
            )
        for pre in entry.get("prerequisites") or []:
            if pre in DONE_IN_CODE:
                continue
            # a stage planned without a chain (no chain fits the module's facts) still
            # carries its row's prerequisites: name what asked for it, never "chain ?"
            owner = f"chain {entry['chain']}" if entry.get("chain") else "the planned stages"
            line = (
                f"TODO(kb port): prerequisite {pre} of {owner} "
                f"({entry.get('phase', '?')}) is not done in code: set it up before the fused "
                "calls run"
            )
            if line not in notes.setdefault(name, []):
                notes[name].append(line)
    for m in inventory:
        if m.unknown and not any(e.get("module") == m.name for e in plan):
            out.setdefault(m.file, ([], {}))[1].setdefault(m.name, []).append(
                "left as is: the plan could not decide " + ", ".join(m.unknown)
            )
    return out


def _insert_at(body: list[Any]) -> int:
    """After the file's leading docstring and imports."""
    import libcst as cst

    at = 0
    for i, st in enumerate(body):
        if isinstance(st, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom, cst.Expr)) for s in st.body
        ):
            at = i + 1
            continue
        break
    return at


def port_text(
    text: str,
    stages: list[Stage],
    notes: dict[str, list[str]],
    rewrite: Any = None,
    taken: set[str] | None = None,
    prefix: str = "",
) -> tuple[str, Any]:
    """The ported text of one file and the rewrite's result (``rewrite``: the pass, the
    whole file's by default; stage ids in ``taken`` get ``prefix:`` in front)."""
    import libcst as cst

    from kb.port import across
    from kb.port.prelude import head
    from kb.port.rewrite import rewrite as whole

    new, result = (rewrite or whole)(text, stages, notes)
    new = across.drop_stale(new, result, notes)
    if taken is not None:
        new = across.unique_ids(new, result, taken, prefix)
    if not result.stages:
        return new, result
    module = cst.parse_module(new)
    prelude = cst.parse_module(
        "import torch\n" + head(result.stages, result.weights, result.helpers)
    )
    body = list(module.body)
    at = _insert_at(body)
    body[at:at] = list(prelude.body)
    return module.with_changes(body=body).code, result


def port(
    path: str, out: str, options: Any, *, write: bool = True, within: str | None = None
) -> list[FilePort]:
    """Port ``path`` (a file or a folder) into ``out``; the files rewritten, in order."""
    src = Path(path)
    if not src.exists():
        raise PortError(f"{path}: no such file or folder")
    try:
        import libcst  # noqa: F401
    except ImportError:
        raise PortError(
            "kb port needs libcst (pip install 'torch-npu-kb[port]'): not importable here"
        ) from None
    dest = Path(out)
    if _same(dest, src) or (src.is_dir() and _inside(dest, src)):
        raise PortError(
            f"{out}: the port would be written over or into what it ports ({path}); "
            "give -o a path outside it"
        )
    plan, inventory = plan_of([str(src)], options, within)
    # the plan names a file as the scan displays it (relative to the working directory
    # when it lies below it): key by the resolved path
    per_file = {str(Path(k).resolve()): v for k, v in stages_and_notes(plan, inventory).items()}
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*.py") if p.is_file())
    dest_root = Path(out)
    clash = next((f for f in files if _same(_target(src, f, dest_root), f)), None)
    if clash is not None:
        raise PortError(
            f"{out}: the port of {clash} would be written over it; give -o another path"
        )
    from kb.port import across

    ported: list[FilePort] = []
    # a file's port takes along the package files holding planned stages of what it builds
    graph, keep, beside = _helpers(src, dest_root, per_file, within)
    taken: set[str] = set()
    done: list[Any] = []  # (file, target, text, ported text, result, notes)
    for f in files + sorted(keep):
        target = beside.get(f) or _target(src, f, dest_root)
        text = f.read_text(encoding="utf-8")
        stages, notes = per_file.get(str(f.resolve()), ([], {}))
        new, result = (text, None)
        if f in keep:
            stages = [s for s in stages if s.module in keep[f]]
            notes = {k: v for k, v in notes.items() if k in keep[f]}
        try:
            if stages or notes:
                only = partial(across.rewrite_only, keep=keep[f]) if f in keep else None
                new, result = port_text(text, stages, notes, only, taken, f.stem)
            if graph is not None:
                new = across.redirect(
                    new, graph, f.resolve(), {k: v.name for k, v in beside.items()}
                )
        except Exception as exc:  # libcst's own parser errors carry line and column
            raise PortError(f"{f}: cannot rewrite: {exc}") from None
        if result is None and new != text:  # only its imports changed
            result = SimpleNamespace(stages={}, weights={}, done=set())
        done.append((f, target, text, new, result, notes))
    if graph is not None:  # a class's stage computed by a class it builds (another file's)
        across.covered_by_built(done, graph)
    for f, target, text, new, result, notes in done:
        fp = FilePort(str(f), str(target))
        if result is not None:
            fp.stages, fp.weights, fp.notes = result.stages, result.weights, notes
            fp.diff = "".join(
                difflib.unified_diff(
                    text.splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    str(f),
                    str(target),
                )
            )
            ported.append(fp)
        if write:
            target.parent.mkdir(parents=True, exist_ok=True)
            if new != text:
                target.write_text(new, encoding="utf-8")
            elif f.resolve() != target.resolve():
                shutil.copyfile(f, target)
    return ported


def _helpers(
    src: Path,
    dest: Path,
    per_file: dict[str, tuple[list[Stage], dict[str, list[str]]]],
    within: str | None = None,
) -> tuple[Any, dict[Path, set[str]], dict[Path, Path]]:
    """For a file: the import graph, the package files to port beside it (file -> the
    definitions reached) and where each goes; nothing for a folder."""
    from kb.port import package

    if not src.is_file():
        return None, {}, {}
    graph, keep = package.helpers(src, {k: v[0] for k, v in per_file.items()}, within)
    beside = package.targets(_target(src, src, dest), list(keep))
    for f, t in beside.items():
        # an earlier port's output may be replaced, nothing else
        ours = t.is_file() and any(
            mark in t.read_text(encoding="utf-8", errors="replace")
            for mark in ("_kb_port_module(", "_kb_stage(", "# kb port: ")
        )
        if t.exists() and (_same(t, f) or _same(t, src) or not ours):
            raise PortError(
                f"{t}: the port of {f} (a package file the port takes along) would be "
                "written over it; give -o a path in another folder"
            )
    return graph, keep, beside


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _inside(child: Path, parent: Path) -> bool:
    try:
        return child.resolve().is_relative_to(parent.resolve())
    except OSError:
        return False


def _target(src: Path, f: Path, out: Path) -> Path:
    if src.is_file():
        return out / src.name if out.is_dir() else out
    return out / f.relative_to(src)


def document(files: list[FilePort]) -> dict[str, Any]:
    """The ``--format json`` document of one port."""
    return {
        "files": [f.as_dict() for f in files],
        "summary": {
            "files": len(files),
            "stages": sum(len(f.stages) for f in files),
            "notes": sum(len(v) for f in files for v in f.notes.values()),
        },
    }
