"""``kb scan --plan --verify``: every planned stage proved on the CPU before any device.

Each scanned file that has planned stages is ported into a scratch folder (``kb port``)
and verified against itself (``kb verify``: tiny sizes from the checkpoint's config, one
set of random weights, the port under ``kb.emulate``).  Each stage of the plan is then
marked ``passed`` (with its worst error per dtype), ``failed`` (with verify's message) or
``not run`` (with the reason: the model's imports, a class that could not be built, a
stage the port did not write or the run never reached).  The plan entries are changed in
place; the JSON plan carries ``verified`` and ``verify_note`` on each stage.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from kb.vocab import INFERENCE_PHASES

PASSED, FAILED, NOT_RUN = "passed", "failed", "not run"


def verify_plan(
    plan: list[dict[str, Any]],
    model_config: str,
    *,
    product: str | None = None,
    quantization: str | None = None,
    parallel: str | None = None,
) -> dict[str, int]:
    """Mark every stage of ``plan``; the count of stages per status."""
    from kb.port.porting import PortError, port
    from kb.port.verify import VerifyError, verify
    from kb.scan.engine import ScanError, ScanOptions

    options = ScanOptions(
        product=product, quantization=quantization, parallel=parallel, model_config=model_config
    )
    files = sorted({str(e.get("file", "")) for e in plan if e.get("stages")})
    for file in files:
        entries = [e for e in plan if str(e.get("file", "")) == file and e.get("stages")]
        with tempfile.TemporaryDirectory(prefix="kb-verify-") as scratch:
            target = Path(scratch) / (Path(file).stem + "_npu.py")
            try:
                port(file, str(target), options)
                doc = verify(file, str(target), model_config, product=product)
            except (PortError, ScanError, VerifyError) as exc:
                _mark_all(entries, NOT_RUN, str(exc))
                continue
        _mark(entries, doc)
    counts = {PASSED: 0, FAILED: 0, NOT_RUN: 0}
    for entry in plan:
        for stage in entry.get("stages") or []:
            if "verified" in stage:
                counts[stage["verified"]] += 1
    return counts


def _mark_all(entries: list[dict[str, Any]], status: str, why: str) -> None:
    for entry in entries:
        for stage in entry.get("stages") or []:
            stage["verified"], stage["verify_note"] = status, why


def _mark(entries: list[dict[str, Any]], doc: dict[str, Any]) -> None:
    """Each planned stage's results: the verify runs of its phase whose stage computes
    the same mapping in the same class."""
    results: dict[tuple[str, str], list[tuple[str, str, dict[str, Any]]]] = {}
    skipped = list(
        dict.fromkeys(
            f"{r['class']}: {r['not_run']}" for r in doc.get("runs", []) if r.get("not_run")
        )
    )
    for run in doc.get("runs", []):
        for s in run.get("stages", []):
            for module in s.get("modules") or []:
                # a stage that computes other mappings of the module too (an expert loop's
                # activation) stands for them
                for mapping in [s.get("mapping"), *(s.get("covers") or [])]:
                    key = (str(module), str(mapping))
                    results.setdefault(key, []).append((run["phase"], run["dtype"], s))
    failures = [
        (str(f.get("mapping")), str(f["message"]))
        for f in doc.get("failures", [])
        if f.get("mapping")
    ]
    for entry in entries:
        phase = str(entry.get("phase", ""))
        for stage in entry.get("stages") or []:
            mapping = str(stage.get("mapping", ""))
            found = [
                (ph, dt, s)
                for ph, dt, s in results.get((str(entry.get("module")), mapping), [])
                if phase not in INFERENCE_PHASES or ph == phase
            ]
            measured = [(ph, dt, s) for ph, dt, s in found if not s.get("rejected")]
            if not measured:
                why = (
                    "the fused call refused every input: " + found[0][2]["rejected"]
                    if found
                    else "; ".join(skipped) or "the port wrote no call for it, or no run reached it"
                )
                stage["verified"], stage["verify_note"] = NOT_RUN, why
            elif all(s["passed"] for _, _, s in measured):
                worst: dict[str, float] = {}
                for _, dt, s in measured:
                    worst[dt] = max(worst.get(dt, 0.0), float(s["max_abs"]))
                refused = sorted({dt for _, dt, s in found if s.get("rejected")} - set(worst))
                stage["verified"] = PASSED
                stage["verify_note"] = (
                    "max abs "
                    + ", ".join(f"{v:.3g} ({dt})" for dt, v in sorted(worst.items()))
                    + "".join(f"; {dt}: the fused call refuses it, not measured" for dt in refused)
                )
            else:
                bad = next(s for _, _, s in measured if not s["passed"])
                module = str(entry.get("module"))
                stage["verified"] = FAILED
                stage["verify_note"] = next(
                    (m for mp, m in failures if mp == mapping and module in m),
                    f"max abs {bad['max_abs']:.3g} over the tolerance",
                )
