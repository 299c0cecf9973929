"""Text for people: ``kb port`` and ``kb verify`` documents."""

from __future__ import annotations

from typing import Any


def port_text(doc: dict[str, Any], *, diff: bool = False) -> str:
    lines: list[str] = []
    for f in doc["files"]:
        lines.append(f"{f['source']} -> {f['target']}: {len(f['stages'])} stage(s) rewritten")
        for sid, st in f["stages"].items():
            args = ", ".join(f"{k}={v!r}" for k, v in (st.get("args") or {}).items())
            lines.append(
                f"  {sid}: {st['operator']} (mapping {st['mapping']}){' ' + args if args else ''}"
            )
        for name, w in f["weights"].items():
            lines.append(f"  weights {name}: {w['merge']} of {', '.join(w['from'])}")
        for cls, notes in f["notes"].items():
            for n in notes:
                lines.append(f"  {cls}: {n}")
        if diff and f.get("diff"):
            lines.append(f["diff"].rstrip("\n"))
    s = doc["summary"]
    lines.append(f"{s['files']} file(s), {s['stages']} stage(s), {s['notes']} note(s)")
    return "\n".join(lines)


def verify_text(doc: dict[str, Any]) -> str:
    lines: list[str] = []
    for r in doc["runs"]:
        head = f"{r['class']} {r['dtype']} {r['phase']}: "
        if r["not_run"]:
            lines.append(head + "not run: " + r["not_run"])
            continue
        lines.append(head + ("ok" if r["passed"] else "FAILED"))
        for s in r["stages"]:
            if s["rejected"]:
                lines.append(f"  stage {s['stage']}: not measured: {s['rejected']}")
                continue
            mark = "ok" if s["passed"] else "FAIL"
            lines.append(
                f"  stage {s['stage']} ({s['operator']}): {mark} max abs {s['max_abs']:.3g} "
                f"max rel {s['max_rel']:.3g} in {s['calls']} call(s)"
            )
        worst = [m for m in r["modules"] if m["error_starts"]]
        out = next((m for m in r["modules"] if m["name"] == "(output)"), None)
        if out is not None:
            lines.append(f"  output: max abs {out['max_abs']:.3g} max rel {out['max_rel']:.3g}")
        for m in worst[:5]:
            lines.append(
                f"  module {m['name']}: max abs {m['max_abs']:.3g} max rel {m['max_rel']:.3g} "
                "over tolerance"
            )
    for name in doc["stages_not_reached"]:
        lines.append(f"stage {name}: not reached by any run")
    for f in doc["failures"]:
        lines.append(f"FAILED {f['class']} {f['dtype']} {f['phase']}: {f['message']}")
    lines.append("verified" if doc["passed"] else "not verified")
    return "\n".join(lines)
