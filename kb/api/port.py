"""``kb port`` and ``kb verify`` as functions returning their JSON documents."""

from __future__ import annotations

from typing import Any

from kb.api.errors import UsageError


def port(
    path: str,
    out: str,
    *,
    product: str | None = None,
    quantization: str | None = None,
    parallel: str | None = None,
    model_config: str | None = None,
    write: bool = True,
    within: str | None = None,
) -> dict[str, Any]:
    """Write the fused port of ``path`` into ``out``; the document lists each rewritten
    file's stages, derived weights, notes and unified diff."""
    from kb.port.porting import PortError, document
    from kb.port.porting import port as _port
    from kb.scan.engine import ScanError, ScanOptions

    options = ScanOptions(
        product=product, quantization=quantization, parallel=parallel, model_config=model_config
    )
    try:
        files = _port(path, out, options, write=write, within=within)
    except (PortError, ScanError) as exc:
        raise UsageError(str(exc)) from None
    doc = document(files)
    for f, entry in zip(files, doc["files"], strict=True):
        entry["diff"] = f.diff
    return doc


def verify(
    original: str,
    ported: str,
    model_config: str,
    *,
    modules: list[str] | None = None,
    phases: tuple[str, ...] | None = None,
    dtypes: tuple[str, ...] | None = None,
    product: str | None = None,
) -> dict[str, Any]:
    """Build both at a tiny size, run the port under kb.emulate, measure every stage."""
    from kb.port.verify import DTYPES, PHASES, VerifyError
    from kb.port.verify import verify as _verify
    from kb.vocab.dtypes import DTYPE_BYTES

    phases = phases or PHASES
    dtypes = dtypes or DTYPES
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        raise UsageError(f"unknown phase {', '.join(unknown)} ({', '.join(PHASES)})")
    # the float types a model computes in (two bytes and more; fp8/fp4 are storage types)
    floats = [d for d, n in DTYPE_BYTES.items() if d.startswith(("float", "bfloat")) and n >= 2]
    wrong = [d for d in dtypes if d not in floats]
    if wrong:
        raise UsageError(f"unknown dtype {', '.join(wrong)} ({', '.join(floats)})")
    try:
        return _verify(
            original,
            ported,
            model_config,
            modules=modules,
            phases=phases,
            dtypes=dtypes,
            product=product,
        )
    except VerifyError as exc:
        raise UsageError(str(exc)) from None
