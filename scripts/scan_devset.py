"""Measure ``kb scan``'s inventory and plan on the development set (issue 19).

    python scripts/scan_devset.py ROOT [--product atlas-a3] [--folders]

ROOT holds the released wheels unpacked (``ROOT/transformers/models/...`` and
``ROOT/diffusers/models/...``); ``tests/data/scan-devset.yaml`` names the files and the
fused-operator families the public NPU ports call for each.  Per file it prints the
families in the plan over the families the ports call, wrong proposals (a stage whose
operator computes something else than the module: a SwiGLU for a GELU MLP, a sigmoid
gate for a softmax router, an RMSNorm for a LayerNorm, a softmax attention for a linear
one, a half rotation for interleaved pairs), ``kb check`` errors on the emitted draft,
and false opportunities (plans for training-only code, cache writes where the module
keeps no cache).  With ``--folders`` each file's folder is scanned instead (the model's
folder as a user names it: its modular and configuration files too), and the families
are those of the whole folder's plan.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent.parent
MANIFEST = HERE / "tests" / "data" / "scan-devset.yaml"


def _family_of(families: dict[str, list[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for fam, ops in families.items():
        for op in ops:
            out.setdefault(op, set()).add(fam)
    return out


def wrong(entry: dict[str, Any], module: Any, ctx: Any) -> list[str]:
    """Stages whose operator computes something other than the module."""
    out = []
    for stage in entry.get("stages", []):
        rec = ctx.operator(stage["operator"])
        fuses = set(rec.get("fuses") or ()) if rec is not None else set()
        f = module.facts
        act = f.get("activation")
        if stage["mapping"] == "swiglu" and act != "silu":
            out.append(f"{stage['operator']} for activation {act}")
        if stage["mapping"] in ("geglu", "gelu", "gelu_tanh") and act == "silu":
            out.append(f"{stage['operator']} for a SiLU MLP")
        if "rms_norm" in fuses and module.kind == "norm.layer":
            out.append(f"{stage['operator']} for a LayerNorm")
        if fuses & {"attention", "flash_attention"} and module.kind == "attention.linear":
            out.append(f"{stage['operator']} for linear attention")
        args = stage.get("args") or {}
        if "gating" in fuses and module.kind == "moe.router":
            score = f.get("scoring", f.get("score"))
            if "norm_type" in args and args["norm_type"] != (1 if score == "sigmoid" else 0):
                out.append(
                    f"{stage['operator']} norm_type {args['norm_type']} for a {score} router"
                )
            if f.get("bias") and "bias_add" not in fuses:
                out.append(f"{stage['operator']} drops the correction bias")
            if score == "sigmoid" and "sigmoid" not in fuses:
                out.append(f"{stage['operator']} has no sigmoid")
        if (
            "rope" in fuses
            and args.get("rotary_mode")
            and f.get("rope")
            and args["rotary_mode"] != f["rope"]
        ):
            out.append(
                f"{stage['operator']} rotary_mode {args['rotary_mode']} for {f['rope']} pairs"
            )
    return out


def false_opportunities(entry: dict[str, Any], module: Any, ctx: Any) -> list[str]:
    out = []
    if any(w in module.name.lower() for w in ("loss", "forcausallm", "pretrainedmodel")):
        out.append(f"{module.name}: not a module to fuse")
    for stage in entry.get("stages", []):
        rec = ctx.operator(stage["operator"])
        fuses = set(rec.get("fuses") or ()) if rec is not None else set()
        if (
            "kv_cache_write" in fuses
            and module.facts.get("cache") in (None, "none")
            and module.kind != "attention.mla"
            and "indexer" not in str(stage.get("stage"))
        ):
            out.append(f"{module.name}: cache write without a cache")
    return out


def measure(root: Path, product: str = "atlas-a3", folders: bool = False) -> list[dict[str, Any]]:
    from kb.api.check import check_text
    from kb.api.scan import scanner
    from kb.scan.emit import document
    from kb.scan.engine import ScanOptions

    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    fam_of = _family_of(manifest["families"])
    made = scanner(options=ScanOptions(product=product, use_config=False))
    rows = []
    for item in manifest["files"]:
        path = root / item["file"]
        if not path.is_file():
            rows.append({"file": item["file"], "missing": True})
            continue
        start = time.perf_counter()
        report = made.scan([str(path.parent if folders else path)])
        seconds = time.perf_counter() - start
        by_name = {(m.file, m.name, m.kind): m for m in report.inventory}
        planned: set[str] = set()
        bad: list[str] = []
        false: list[str] = []
        for entry in report.plan:
            module = by_name[(entry["file"], entry["module"], entry["kind"])]
            for stage in entry.get("stages", []):
                planned |= fam_of.get(stage["operator"], set())
            bad += wrong(entry, module, made.ctx)
            false += false_opportunities(entry, module, made.ctx)
        wanted = set(item["families"])
        text = document(report, {"product": product}, item["model"])
        errors = [f for f in check_text(text, "draft.yaml") if f.severity == "error"]
        rows.append(
            {
                "file": item["file"],
                "model": item["model"],
                "wanted": sorted(wanted),
                "found": sorted(wanted & planned),
                "missed": sorted(wanted - planned),
                "wrong": bad,
                "check_errors": [f"{e.code} {e.message}" for e in errors],
                "false": false,
                "seconds": round(seconds, 2),
                "modules": len(report.inventory),
                "entries": len(report.plan),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "root", type=Path, help="folder holding transformers/ and diffusers/ unpacked"
    )
    parser.add_argument("--product", default="atlas-a3")
    parser.add_argument("--folders", action="store_true", help="scan each file's folder")
    args = parser.parse_args(argv)
    rows = measure(args.root, args.product, args.folders)
    total_w = total_f = 0
    print(
        "| file | families in plan / ports call | missed | wrong | kb check errors | false opp. | s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("missing"):
            print(f"| {r['file']} | missing | | | | | |")
            continue
        total_w += len(r["wanted"])
        total_f += len(r["found"])
        print(
            f"| {Path(r['file']).name} | {len(r['found'])}/{len(r['wanted'])} | {', '.join(r['missed'])} | "
            f"{len(r['wrong'])} | {len(r['check_errors'])} | {len(r['false'])} | {r['seconds']} |"
        )
        for line in r["wrong"] + r["check_errors"] + r["false"]:
            print(f"|   | {line} | | | | | |", file=sys.stderr)
    print(f"\ntotal: {total_f}/{total_w} families ({100 * total_f / max(total_w, 1):.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
