"""Port and verify development-set models; print per model and stage the worst errors.

    python scripts/port_devset.py --origset ROOT [--name NAME ...] [--hf MODEL ...] [--json F]

``--origset ROOT`` is what ``scripts/fetch_origset.py ROOT`` laid out (the manifest
``tests/data/scan-origset.yaml`` names each file and its checkpoint config); ``--hf llama``
ports ``transformers/models/llama/modeling_llama.py`` (``--hf-root``: the unzipped wheel;
else the installed package) with its config class's defaults, shrunk; ``--diffusers
dit_transformer_2d`` ports ``diffusers/models/transformers/dit_transformer_2d.py`` the same
way (``--diffusers-root``; its registered defaults, shrunk).  Each model is ported into a scratch folder and verified in
float32 and bfloat16, prefill and decode.  Model code is read where it lies, never copied
into the project.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent.parent
MANIFEST = HERE / "tests" / "data" / "scan-origset.yaml"


def one(original: Path, config: Path | None, scratch: Path) -> dict[str, Any]:
    """Port one file and verify it; the summary row (errors as they came)."""
    from kb.api.errors import UsageError
    from kb.api.port import port, verify

    if config is None:
        config = scratch / "empty.json"
        config.write_text("{}")
    out = scratch / f"{original.stem}_npu.py"
    started = time.perf_counter()
    row: dict[str, Any] = {"file": str(original)}
    try:
        doc = port(str(original), str(out), model_config=str(config))
    except UsageError as exc:
        return {**row, "error": f"port: {exc}"}
    files = doc["files"]
    row["stages"] = {k: v["mapping"] for f in files for k, v in f["stages"].items()}
    row["notes"] = sum(len(v) for f in files for v in f["notes"].values())
    if not row["stages"]:
        return {**row, "error": "nothing planned could be rewritten"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = verify(str(original), str(out), str(config))
    except UsageError as exc:
        return {**row, "error": f"verify: {exc}"}
    row["seconds"] = round(time.perf_counter() - started, 1)
    row["passed"] = result["passed"]
    row["runs"] = [
        {
            "class": r["class"],
            "dtype": r["dtype"],
            "phase": r["phase"],
            "not_run": r["not_run"],
            "stages": {
                s["stage"]: ("rejected" if s["rejected"] else (round(s["max_abs"], 6), s["passed"]))
                for s in r["stages"]
            },
            "output": next(
                ((m["max_abs"], m["passed"]) for m in r["modules"] if m["name"] == "(output)"),
                None,
            ),
        }
        for r in result["runs"]
    ]
    row["failures"] = [f["message"][:300] for f in result["failures"]]
    row["not_reached"] = result["stages_not_reached"]
    return row


def apart(original: Path, config: Path | None, scratch: Path) -> dict[str, Any]:
    """:func:`one` in a process of its own: a model's imports, the emulator it ran under
    and its memory never reach the next model (a library imported after another model's
    emulated run would see a torch_npu that is not there)."""
    args = [sys.executable, __file__, "--one", str(original), str(config or ""), str(scratch)]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    last = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not last:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"file": str(original), "error": f"exit {done.returncode}: {tail[:200]}"}
    return dict(json.loads(last[-1]))


def table(rows: list[dict[str, Any]]) -> str:
    """Per model and stage the worst absolute error in float32 and in bfloat16 (over the
    runs that measured it; 'refused' where the kernel took no such input), and the verdict."""
    lines = ["| model | stage | float32 | bfloat16 | verdict |", "|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['name']} | | | | {row['error'][:120]} |")
            continue
        worst: dict[str, dict[str, Any]] = {}
        for run in row["runs"]:
            for stage, got in run["stages"].items():
                cell = worst.setdefault(stage, {})
                old = cell.get(run["dtype"])
                if got == "rejected":
                    cell.setdefault(run["dtype"], "refused")
                elif not isinstance(old, float) or got[0] > old:
                    cell[run["dtype"]] = float(got[0])
        verdict = "passed" if row["passed"] else "FAILED"
        for stage in row["stages"]:
            cell = worst.get(stage)
            if cell is None:
                lines.append(f"| {row['name']} | {stage} | not reached | | {verdict} |")
                continue
            f32, b16 = (
                f"{v:.2g}" if isinstance(v, float) else str(v or "")
                for v in (cell.get("float32"), cell.get("bfloat16"))
            )
            lines.append(f"| {row['name']} | {stage} | {f32} | {b16} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--origset", type=Path)
    ap.add_argument("--name", action="append", default=[])
    ap.add_argument("--hf", action="append", default=[], metavar="MODEL")
    ap.add_argument(
        "--hf-root",
        type=Path,
        help="the folder holding the transformers package (the wheel unzipped); read in "
        "place of the installed one, as the scan development set reads it",
    )
    ap.add_argument(
        "--diffusers",
        action="append",
        default=[],
        metavar="FILE",
        help="a diffusers transformer, named by its file in models/transformers without .py "
        "(dit_transformer_2d, pixart_transformer_2d, transformer_sd3)",
    )
    ap.add_argument(
        "--diffusers-root",
        type=Path,
        help="the diffusers package folder (the wheel unzipped: DIR/diffusers or the folder "
        "holding models/); else the installed package",
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:  # one model, in the process apart() started
        original, config, scratch = args.one
        print(json.dumps(one(Path(original), Path(config) if config else None, Path(scratch))))
        return 0
    todo: list[tuple[str, Path, Path | None]] = []
    if args.origset:
        manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
        for entry in manifest.get("files", []):
            if args.name and entry["name"] not in args.name:
                continue
            cfg = entry.get("model_config")
            todo.append(
                (
                    entry["name"],
                    args.origset / entry["name"] / entry["path"],
                    HERE / cfg if cfg else None,
                )
            )
    if args.hf:
        if args.hf_root:
            base = args.hf_root / "transformers" / "models"
        else:
            import transformers

            base = Path(transformers.__file__).parent / "models"
        todo += [(f"hf:{m}", base / m / f"modeling_{m}.py", None) for m in args.hf]
    if args.diffusers:
        if args.diffusers_root:
            root = args.diffusers_root
            root = root / "diffusers" if (root / "diffusers" / "models").is_dir() else root
        else:
            import diffusers

            root = Path(diffusers.__file__).parent
        base = root / "models" / "transformers"
        todo += [(f"diffusers:{m}", base / f"{m}.py", None) for m in args.diffusers]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, cfg in todo:
            scratch = Path(tmp) / name.replace(":", "_")
            scratch.mkdir()
            row = {"name": name, **apart(path, cfg, scratch)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
