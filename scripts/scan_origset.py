"""Measure ``kb scan --plan`` on original model code (issue 29's development set).

    python scripts/scan_origset.py ROOT [--product atlas-a3] [--format text|json]

ROOT holds the files of ``tests/data/scan-origset.yaml`` laid out as ``ROOT/<name>/<path>``
with the package folders around them (``scripts/fetch_origset.py ROOT --mirrors DIR`` writes
that).  Per file it runs what a user runs, ``kb scan FILE --plan --format json
--emit-candidates DRAFT`` (with ``--model-config`` when the manifest names a config and the
installed ``kb`` has that option), then ``kb check DRAFT``, and prints: the families planned
over the families the NPU ports call, the wrong proposals (a stage that computes something
other than the module's recorded facts: a decode phase or a causal mask on a bidirectional
module, a cache write where nothing is cached, the wrong GLU half or activation, a rotary
layout that pairs other elements, a sigmoid gate for a softmax router, a dropped correction
bias or sinks, an RMSNorm for a LayerNorm, ...), the ``kb check`` errors on the draft, and
totals overall, for LLM and for diffusion files.  Nothing is fetched.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent.parent
MANIFEST = HERE / "tests" / "data" / "scan-origset.yaml"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scan_devset import _family_of  # noqa: E402  (a sibling script, not a package)
from scan_origset_facts import wrong_stages  # noqa: E402

KB = [sys.executable, "-m", "kb"]


def has_model_config_option() -> bool:
    """Whether the installed ``kb scan`` takes ``--model-config`` (issue 29 adds it)."""
    out = subprocess.run([*KB, "scan", "--help"], capture_output=True, text=True, check=False)
    return "--model-config" in out.stdout


def run_plan(path: Path, product: str, config: Path | None, draft: Path) -> dict[str, Any]:
    """``kb scan --plan --format json`` of one file, writing its candidate draft."""
    cmd = [
        *KB,
        "scan",
        str(path),
        "--plan",
        "--format",
        "json",
        "--no-config",
        "--product",
        product,
        "--emit-candidates",
        str(draft),
    ]
    if config is not None:
        cmd += ["--model-config", str(config)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode == 2 or not out.stdout.strip():
        raise RuntimeError(f"kb scan {path}: exit {out.returncode}: {out.stderr.strip()[-400:]}")
    document: dict[str, Any] = json.loads(out.stdout)
    return document


def check_errors(draft: Path) -> list[str]:
    """``kb check`` errors on the emitted draft (code and message)."""
    if not draft.is_file():
        return []
    out = subprocess.run(
        [*KB, "check", str(draft), "--format", "json"], capture_output=True, text=True, check=False
    )
    if out.returncode == 2 or not out.stdout.strip():
        return [f"kb check could not read the draft: {out.stderr.strip()[-300:]}"]
    findings = json.loads(out.stdout)["findings"]
    return [
        f"{f['code']} line {f['line']}: {f['message']}"
        for f in findings
        if f["severity"] == "error"
    ]


def measure_one(
    item: dict[str, Any], root: Path, product: str, fam_of: dict[str, set[str]], use_config: bool
) -> dict[str, Any]:
    """One manifest file's row: families, wrong proposals, check errors."""
    path = root / item["name"] / item["path"]
    row: dict[str, Any] = {"name": item["name"], "kind": item["kind"], "model": item["model"]}
    if not path.is_file():
        return {**row, "missing": True}
    config = HERE / item["model_config"] if item.get("model_config") else None
    row["config"] = "used" if config and use_config else ("not used" if config else "none")
    with tempfile.TemporaryDirectory(prefix="kb-origset-") as tmp:
        draft = Path(tmp) / "draft.yaml"
        try:
            document = run_plan(path, product, config if use_config else None, draft)
        except RuntimeError as exc:
            return {**row, "failed": str(exc)}
        row["check_errors"] = check_errors(draft)
    planned: set[str] = set()
    bad: list[str] = []
    for entry in document.get("plan", []):
        for stage in entry.get("stages", []):
            planned |= fam_of.get(stage.get("operator", ""), set())
        bad += wrong_stages(entry, module_facts(item, entry.get("module", "")))
    wanted = set(item["families"])
    return {
        **row,
        "wanted": sorted(wanted),
        "found": sorted(wanted & planned),
        "missed": sorted(wanted - planned),
        "wrong": bad,
        "modules": len(document.get("inventory", [])),
        "entries": len(document.get("plan", [])),
    }


def module_facts(item: dict[str, Any], module: str) -> dict[str, Any]:
    """The recorded facts of a planned module (by class name), over the file's defaults."""
    name = module.rsplit(".", 1)[-1]
    return {**(item.get("all_modules") or {}), **((item.get("modules") or {}).get(name) or {})}


def measure(
    root: Path, product: str = "atlas-a3", names: list[str] | None = None
) -> list[dict[str, Any]]:
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    fam_of = _family_of(manifest["families"])
    use_config = has_model_config_option()
    items = [i for i in manifest["files"] if not names or i["name"] in names]
    return [measure_one(item, root, product, fam_of, use_config) for item in items]


def totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Families found/wanted, wrong proposals and check errors: overall, LLM, diffusion."""
    out: dict[str, dict[str, int]] = {}
    for scope in ("all", "llm", "diffusion"):
        chosen = [r for r in rows if "wanted" in r and scope in ("all", r["kind"])]
        out[scope] = {
            "files": len(chosen),
            "found": sum(len(r["found"]) for r in chosen),
            "wanted": sum(len(r["wanted"]) for r in chosen),
            "wrong": sum(len(r["wrong"]) for r in chosen),
            "check_errors": sum(len(r["check_errors"]) for r in chosen),
        }
    return out


def render_text(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| file | kind | families planned / ports call | missed | wrong | kb check errors | config |",
        "|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    for r in rows:
        if r.get("missing") or r.get("failed"):
            lines.append(
                f"| {r['name']} | {r['kind']} | {'missing' if r.get('missing') else 'scan failed'} | | | | |"
            )
            if r.get("failed"):
                details.append(f"{r['name']}: {r['failed']}")
            continue
        lines.append(
            f"| {r['name']} | {r['kind']} | {len(r['found'])}/{len(r['wanted'])} | {', '.join(r['missed'])} "
            f"| {len(r['wrong'])} | {len(r['check_errors'])} | {r['config']} |"
        )
        details += [f"{r['name']}: wrong: {w}" for w in r["wrong"]]
        details += [f"{r['name']}: kb check: {e}" for e in r["check_errors"]]
    lines.append("")
    for scope, t in totals(rows).items():
        share = 100 * t["found"] / max(t["wanted"], 1)
        lines.append(
            f"{scope}: {t['found']}/{t['wanted']} families ({share:.0f}%) in {t['files']} files, "
            f"{t['wrong']} wrong, {t['check_errors']} kb check errors"
        )
    if any(r.get("config") == "not used" for r in rows):
        lines.append(
            "note: kb scan has no --model-config here; the manifest's configs were not used"
        )
    return "\n".join(lines + ([""] + details if details else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "root", type=Path, help="folder holding ROOT/<name>/<path> (scripts/fetch_origset.py)"
    )
    parser.add_argument("--product", default="atlas-a3")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--name", action="append", default=[], help="only this manifest entry (repeatable)"
    )
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"{args.root}: not a folder (lay the files out with scripts/fetch_origset.py)")
    rows = measure(args.root, args.product, args.name)
    if args.format == "json":
        print(json.dumps({"files": rows, "totals": totals(rows)}, indent=1))
    else:
        print(render_text(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
