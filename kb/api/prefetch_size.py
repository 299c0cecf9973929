"""``kb prefetch-size`` as functions: the bytes of a weight and the ``max_size`` to start
``npu_prefetch`` with, from the prefetch playbook's formulas.

Arguments may be given as the command line has them (text: ``"7168"``, ``"50%"``,
``"7168x18432"``) or as numbers and a shape list; either way they are read as their
text, so the checks and their messages are the same for every caller.  Messages name
the command's flags (``--hidden``), the one spelling documented for every front end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.advice.prefetch_size import Size
    from kb.catalog.compiled import Catalog

#: A size or count as text or a number.
Number = str | int | float
#: Bounds of every numeric input: far above any real model (a hidden size, an expert
#: count, a TP degree; microseconds and GB/s), far below where integer text conversion
#: (4,300 digits), float conversion or the byte arithmetic would fail or lose exactness.
MAX_WHOLE = 2**40
MAX_NUMBER = 1e12
#: Byte counts past this are not a weight any device holds (and not exact as floats).
MAX_RESULT_BYTES = 2**62
Weight = tuple[str, str, dict[str, Any]]  # formula id, label, inputs
Bound = tuple[str, dict[str, float]]  # cap formula id, inputs


class PlaybookMissing(LookupError):
    """The prefetch playbook record is not in the catalog (exit 1: a name that does not exist)."""


@dataclass(frozen=True)
class Request:
    """What to size, checked: the weights, their dtype, a factor override and the caps."""

    weights: list[Weight]
    dtype: str
    factor: float | None
    caps: list[Bound]


def request(
    *,
    shape: str | Sequence[int] | None = None,
    dtype: str = "bf16",
    hidden: Number | None = None,
    intermediate: Number | None = None,
    gate_up: bool = False,
    moe: bool = False,
    moe_intermediate: Number | None = None,
    experts_per_rank: Number | None = None,
    moe_tp: Number = 1,
    gmm: Number | None = None,
    tp: Number = 1,
    factor: Number | None = None,
    window_us: Number | None = None,
    bandwidth: Number | None = None,
    l2: Number | None = None,
) -> Request:
    """The checked request; UsageError saying which input cannot be sized and why."""
    from kb.advice.prefetch_size import SizeInputError
    from kb.api.errors import UsageError

    if shape is not None and not isinstance(shape, str):
        shape = "x".join(map(str, shape)) if shape else None
    try:
        weights = _weights(
            shape=shape,
            hidden=_text(hidden),
            intermediate=_text(intermediate),
            gate_up=gate_up,
            moe=moe,
            moe_intermediate=_text(moe_intermediate),
            experts_per_rank=_text(experts_per_rank),
            moe_tp=str(moe_tp),
            gmm=_text(gmm),
            tp=str(tp),
        )
        fraction = _factor(_text(factor))
        caps = _caps(_text(window_us), _text(bandwidth), _text(l2))
    except SizeInputError as exc:
        raise UsageError(str(exc)) from None
    return Request(weights, dtype, fraction, caps)


def playbook_record(catalog: Catalog) -> dict[str, Any] | None:
    """The prefetch playbook the formulas come from, or None when the records lack it."""
    from kb.advice.prefetch_size import PLAYBOOK

    rec = catalog.get(PLAYBOOK)
    return rec if rec is not None and rec.get("kind") == "playbook" else None


def sizes(catalog: Catalog, req: Request) -> tuple[dict[str, Any], list[Size]]:
    """The playbook and one :class:`Size` per weight; PlaybookMissing, or UsageError for
    inputs the playbook's formulas reject."""
    from kb.advice.prefetch_size import PLAYBOOK, SizeInputError, cap, compute
    from kb.api.errors import UsageError

    playbook = playbook_record(catalog)
    if playbook is None:
        raise PlaybookMissing(f"the {PLAYBOOK!r} playbook record is missing")
    try:
        caps = [cap(playbook, fid, inputs) for fid, inputs in req.caps]
        out = [
            compute(playbook, fid, label, inputs, req.dtype, req.factor, caps)
            for fid, label, inputs in req.weights
        ]
    except SizeInputError as exc:
        raise UsageError(str(exc)) from None
    except (OverflowError, ValueError):  # bounded inputs make this unreachable; never a traceback
        raise UsageError("the inputs give a size too large to compute; check them") from None
    for size in out:
        if size.theoretical > MAX_RESULT_BYTES:
            raise UsageError(
                f"{size.label}: {size.theoretical} bytes is more than any device "
                f"holds (at most 2**62); check the inputs"
            )
    return playbook, out


def document(found: list[Size]) -> dict[str, Any]:
    """The ``--format json`` document: ``{"playbook", "results"}``."""
    from kb.advice.prefetch_size import PLAYBOOK

    return {"playbook": PLAYBOOK, "results": [s.as_dict() for s in found]}


def prefetch_size(catalog: Catalog, **inputs: Any) -> dict[str, Any]:
    """:func:`request` then :func:`sizes`, as the ``--format json`` document."""
    return document(sizes(catalog, request(**inputs))[1])


def _text(value: Number | None) -> str | None:
    return None if value is None else str(value)


def _positive(flag: str, value: str | None) -> int:
    from kb.advice.prefetch_size import SizeInputError

    if value is None:
        raise SizeInputError(f"{flag} is required here")
    text = value.strip().replace("_", "")
    if not text.isdecimal() or len(text) > 15 or not 0 < int(text) <= MAX_WHOLE:
        raise SizeInputError(
            f"{flag} {_shown(value)} must be a positive whole number (at most 2**40)"
        )
    return int(text)


def _shown(value: str) -> str:
    """``value`` quoted for a message, cut short (a 400-digit number is not read back)."""
    return repr(value if len(value) <= 30 else value[:27] + "...")


def _positive_number(flag: str, value: str) -> float:
    from kb.advice.prefetch_size import SizeInputError

    try:
        number = float(value) if len(value) <= 40 else float("nan")
    except ValueError:
        raise SizeInputError(f"{flag} {_shown(value)} is not a number") from None
    if not (number > 0) or number == float("inf"):
        raise SizeInputError(f"{flag} {_shown(value)} must be a positive number")
    if number > MAX_NUMBER:
        raise SizeInputError(f"{flag} {_shown(value)} must be at most {MAX_NUMBER:g}")
    return number


def _caps(window_us: str | None, bandwidth: str | None, l2: str | None) -> list[Bound]:
    """(playbook formula id, inputs) of every cap asked for."""
    from kb.advice.prefetch_size import CAP_L2, CAP_WINDOW, SizeInputError
    from kb.check.values import SizeError, parse_size

    out: list[Bound] = []
    if (window_us is None) != (bandwidth is None):
        raise SizeInputError(
            "--window-us and --bandwidth go together: the window cap is window time x bandwidth"
        )
    if window_us is not None and bandwidth is not None:
        out.append(
            (
                CAP_WINDOW,
                {
                    "window_us": _positive_number("--window-us", window_us),
                    "bandwidth_gbps": _positive_number("--bandwidth", bandwidth),
                },
            )
        )
    if l2 is not None:
        try:
            size = parse_size(l2)
        except SizeError as exc:
            raise SizeInputError(f"--l2: {exc}") from None
        if size is None:
            raise SizeInputError(
                f"--l2 {l2!r} names something kb cannot size; give bytes or e.g. '96MiB'"
            )
        if size <= 0:
            raise SizeInputError(f"--l2 {l2!r} must be above 0")
        out.append((CAP_L2, {"l2_bytes": size}))
    return out


def _factor(value: str | None) -> float | None:
    from kb.advice.prefetch_size import SizeInputError

    if value is None:
        return None
    try:
        f = float(value.rstrip("%")) / (100 if value.endswith("%") else 1)
    except ValueError:
        raise SizeInputError(f"--factor {value!r} is not a number (e.g. 0.5 or 50%)") from None
    if not (0 < f <= 1):
        raise SizeInputError(f"--factor {value!r} must be above 0 and at most 1")
    return f


def _weights(
    *,
    shape: str | None,
    hidden: str | None,
    intermediate: str | None,
    gate_up: bool,
    moe: bool,
    moe_intermediate: str | None,
    experts_per_rank: str | None,
    moe_tp: str,
    gmm: str | None,
    tp: str,
) -> list[Weight]:
    """(formula id, label, inputs) for every size asked for."""
    from kb.advice.prefetch_size import SizeInputError

    moe_only = [
        f
        for f, v in (
            ("--moe-intermediate", moe_intermediate),
            ("--experts-per-rank", experts_per_rank),
            ("--gmm", gmm),
        )
        if v is not None
    ]
    ranks = _positive("--tp", tp)
    if moe:
        if ranks != 1:
            raise SizeInputError("--tp shards dense weights; for expert weights use --moe-tp")
        if shape or intermediate or gate_up:
            raise SizeInputError(
                "--moe sizes expert weights from --hidden, --moe-intermediate, "
                "--experts-per-rank and --moe-tp; drop --shape/--intermediate/--gate-up"
            )
        return _moe_weights(hidden, moe_intermediate, experts_per_rank, moe_tp, gmm)
    if moe_only:
        raise SizeInputError(f"{', '.join(moe_only)} only apply with --moe")
    if shape:
        return [_shape_weight(shape, hidden, intermediate, gate_up, ranks)]
    return [_dense_weight(hidden, intermediate, gate_up, ranks)]


def _moe_weights(
    hidden: str | None,
    moe_intermediate: str | None,
    experts_per_rank: str | None,
    moe_tp: str,
    gmm: str | None,
) -> list[Weight]:
    from kb.advice.prefetch_size import FORMULA_GMM, SizeInputError

    missing = [
        f
        for f, v in (
            ("--hidden", hidden),
            ("--moe-intermediate", moe_intermediate),
            ("--experts-per-rank", experts_per_rank),
        )
        if v is None
    ]
    if missing:
        raise SizeInputError(
            f"--moe needs {', '.join(missing)} (and optionally --moe-tp, --gmm 1|2)"
        )
    inputs = {
        "hidden": _positive("--hidden", hidden),
        "moe_intermediate": _positive("--moe-intermediate", moe_intermediate),
        "experts_per_rank": _positive("--experts-per-rank", experts_per_rank),
        "moe_tp": _positive("--moe-tp", moe_tp),
    }
    if inputs["moe_intermediate"] % inputs["moe_tp"]:
        raise SizeInputError(
            f"--moe-intermediate {inputs['moe_intermediate']} is not divisible by "
            f"--moe-tp {inputs['moe_tp']}"
        )
    gmms = [int(gmm)] if gmm else [1, 2]
    names = {1: "GMM1 (gate+up, w13) per rank", 2: "GMM2 (down, w2) per rank"}
    return [(FORMULA_GMM[g], names[g], inputs) for g in gmms]


def _shape_weight(
    shape: str, hidden: str | None, intermediate: str | None, gate_up: bool, tp: int
) -> Weight:
    from kb.advice.prefetch_size import FORMULA_SHAPE, SizeInputError, parse_shape

    if hidden or intermediate or gate_up:
        raise SizeInputError("give either --shape or --hidden/--intermediate, not both")
    dims = parse_shape(shape)
    elements = 1
    for d in dims:
        elements *= d
        if elements > MAX_WHOLE**2:
            raise SizeInputError(
                f"--shape {_shown(shape)} has more than 2**80 elements; check the dimensions"
            )
    label = "weight " + " x ".join(str(d) for d in dims) + (f" / tp {tp}" if tp > 1 else "")
    return (FORMULA_SHAPE, label, {"elements": elements, "tp": tp})


def _dense_weight(hidden: str | None, intermediate: str | None, gate_up: bool, tp: int) -> Weight:
    from kb.advice.prefetch_size import (
        FORMULA_GATE_UP,
        FORMULA_HIDDEN_INTERMEDIATE,
        FORMULA_SQUARE,
        SizeInputError,
    )

    if hidden is None:
        raise SizeInputError(
            "say which weight to size: --shape KxN, or --hidden H [--intermediate I "
            "[--gate-up]], or --moe with its sizes (see kb prefetch-size --help)"
        )
    size = _positive("--hidden", hidden)
    per_rank = f" / tp {tp}" if tp > 1 else ""
    if intermediate is None:
        if gate_up:
            raise SizeInputError("--gate-up needs --intermediate")
        return (
            FORMULA_SQUARE,
            f"hidden x hidden projection ({size} x {size})" + per_rank,
            {"hidden": size, "tp": tp},
        )
    inter = _positive("--intermediate", intermediate)
    if gate_up:
        return (
            FORMULA_GATE_UP,
            f"gate_up_proj ({size} x 2*{inter})" + per_rank,
            {"hidden": size, "intermediate": inter, "tp": tp},
        )
    return (
        FORMULA_HIDDEN_INTERMEDIATE,
        f"hidden x intermediate matrix ({size} x {inter})" + per_rank,
        {"hidden": size, "intermediate": inter, "tp": tp},
    )
