"""``kb scan --emit-candidates``: the first steps of the fusion workflow, automated.

The draft candidate list (format v1, ``docs/candidate-list.md``) has one candidate per
fusion opportunity the scan found (status ``candidate``, the operator the records rank
first, the alternatives in ``notes``) and one per torch_npu operator the code already
calls (status ``replaced``, with the literal arguments it passes), so ``kb check`` lints
the plan and the port together.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from kb.scan.engine import ScanReport, SiteInfo
from kb.scan.model.plan import BESIDE


def _module(file: str, scope: str) -> str:
    stem = Path(file).stem
    owner = scope.rsplit(".", 1)[0] if "." in scope else scope
    return f"{stem}.{owner}" if owner else stem


def _same(file: str) -> str:
    """One spelling of a file's path, however the scan was given it."""
    try:
        return str(Path(file).resolve())
    except (OSError, RuntimeError, ValueError):
        return file


def _helpers(file: str, planned: set[tuple[str, str]], memo: dict[str, set[str]]) -> set[str]:
    """The module-level functions of ``file`` its planned classes call, directly or through
    one another (by name; the file is parsed again only when a finding needs it)."""
    if file not in memo:
        memo[file] = set()
        from kb.scan.model.files import Refusal, read_source
        from kb.scan.sources import MAX_BYTES

        text = read_source(file, MAX_BYTES)  # regular files only, never a FIFO swapped in
        if isinstance(text, Refusal):
            return memo[file]
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return memo[file]
        classes = {name for f, name in planned if f == file}
        functions = {
            n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        todo: list[ast.AST] = [
            n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in classes
        ]
        while todo:
            for node in ast.walk(todo.pop()):
                if (
                    isinstance(node, ast.Name)
                    and node.id in functions
                    and node.id not in memo[file]
                ):
                    memo[file].add(node.id)
                    todo.append(functions[node.id])
    return memo[file]


def _scalar_args(args: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in args.items()
        if v is None
        or isinstance(v, (bool, int, float, str))
        or (isinstance(v, list) and all(isinstance(x, (bool, int, float, str)) for x in v))
    }


def planned(report: ScanReport) -> list[dict[str, Any]]:
    """One candidate per plan stage: module and phase, the chain (when the operator is
    one of its stages), the arguments, the prerequisites and the mapping id in notes."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for entry in report.plan:
        module = f"{Path(entry.get('file', '')).stem}.{entry['module']}"
        for stage in entry.get("stages", []):
            key = (module, stage["operator"], entry["phase"])
            if key in seen:
                continue
            seen.add(key)
            cand: dict[str, Any] = {
                "module": module,
                "phase": entry["phase"],
                "operator": stage["operator"],
            }
            prereq = entry.get("prerequisites") or []
            cand["status"] = "needs-prerequisite" if prereq else "candidate"
            replaced = any(
                n.startswith(("the chain applies", BESIDE)) for n in stage.get("notes", [])
            )
            if entry.get("chain") and not replaced:
                cand["chain"] = entry["chain"]
            if prereq:
                cand["prerequisites"] = list(prereq)
            if stage.get("args"):
                cand["args"] = _scalar_args(stage["args"])
            notes = [
                f"mapping {stage['mapping']}",
                f"{entry['kind']} ({entry.get('file', '')})",
                *stage.get("notes", []),
                *entry.get("notes", []),
            ]
            if stage.get("passed"):
                notes.append("passed: " + ", ".join(stage["passed"]))
            cand["notes"] = "; ".join(notes)
            out.append(cand)
    return out


def candidates(report: ScanReport) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = planned(report)
    # the inventory names files as the reader resolved them, findings as the user gave them
    planned_classes = {(_same(m.file), m.name.split(".")[0]) for m in report.inventory}
    planned_files = {f for f, _ in planned_classes}
    helpers: dict[str, set[str]] = {}
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for opp in report.opportunities:
        where = _same(opp.file)
        if not opp.operators or (where, opp.scope.split(".")[0]) in planned_classes:
            continue  # whole-module matches name chains; planned modules come from the plan
        if (
            where in planned_files
            and "." not in opp.scope
            and opp.scope in _helpers(where, planned_classes, helpers)
        ):
            # a helper runs inside the planned modules that call it, planned (and proven)
            # there with their facts; its text alone decides no half, approximation or mask
            continue
        key = (_module(opp.file, opp.scope), opp.operators[0])
        if key in by_key:  # two patterns of one module with one answer (attention + repeat_kv)
            by_key[key]["replaces"] += f"; {opp.what} ({opp.file}:{opp.line}-{opp.end_line})"
            continue
        cand: dict[str, Any] = {"module": _module(opp.file, opp.scope)}
        if opp.phase:
            cand["phase"] = opp.phase
        cand["operator"] = opp.operators[0]
        cand["status"] = "candidate"
        cand["replaces"] = f"{opp.what} ({opp.file}:{opp.line}-{opp.end_line})"
        notes = []
        if len(opp.operators) > 1:
            notes.append(f"alternatives: {', '.join(opp.operators[1:4])}")
        if opp.chains:
            notes.append(f"reference chains: {', '.join(opp.chains)}")
        if notes:
            cand["notes"] = "; ".join(notes)
        by_key[key] = cand
        out.append(cand)
    merged: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for site in report.sites:
        if site.custom or site.record is None:
            continue
        site_key = (_module(site.file, site.scope), site.record, site.phase)
        found = merged.get(site_key)
        if found is None:
            cand = {"module": site_key[0]}
            if site.phase:
                cand["phase"] = site.phase
            cand.update(
                {
                    "operator": site.record,
                    "status": "replaced",
                    "evidence": f"{site.file}:{site.line}",
                }
            )
            args = _scalar_args(site.args)
            if args:
                cand["args"] = args
            if site.passed:
                cand["passed"] = list(site.passed)
            merged[site_key] = cand
        else:
            found["evidence"] += f", {site.file}:{site.line}"
            _merge_args(found, site)
    return out + list(merged.values())


def _merge_args(cand: dict[str, Any], site: SiteInfo) -> None:
    """Two calls of one operator in one module: keep what they agree on, the rest is passed."""
    args = cand.get("args", {})
    passed = set(cand.get("passed", [])) | set(site.passed)
    new = _scalar_args(site.args)
    for name in set(args) | set(new):
        if args.get(name, object()) != new.get(name, object()):
            args.pop(name, None)
            passed.add(name)
    if args:
        cand["args"] = args
    else:
        cand.pop("args", None)
    if passed:
        cand["passed"] = sorted(passed)


def document(report: ScanReport, target: dict[str, Any], model: str) -> str:
    import yaml

    body = {"version": 1, "model": model, "target": target, "candidates": candidates(report)}
    head = (
        "# Draft candidate list written by `kb scan --emit-candidates`.\n"
        "# Review it: confirm each operator, set phases, then run `kb check` on it.\n"
    )
    return head + yaml.dump(
        body, Dumper=_plain_dumper(), sort_keys=False, allow_unicode=True, width=100
    )


def _plain_dumper() -> Any:
    """A safe dumper writing every value where it is used, never as an anchor and alias:
    a draft is edited by hand (an alias would tie two candidates' arguments together),
    and which values a scan's objects happen to share (one process or several) must not
    change the text."""
    import yaml

    class Plain(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return Plain
