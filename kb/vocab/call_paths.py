"""Operator call paths: the prefixes under which a torch_npu operator is reachable.

``torch_npu.npu_rms_norm`` and ``torch.ops.npu.npu_rms_norm`` are one operator; the
ATB kernels live under ``torch.ops.atb``, and op-plugin exposes some of them as
``torch_npu.X`` and others only as ``torch_npu.atb.X`` (its ``_atb_ops.py`` keeps the
two lists; ``torch_npu.npu_ring_mla`` raises AttributeError).  Every place that strips
a call path to the operator name, or spells an operator from its namespace, reads this
table — a second list once lacked ``torch.ops.atb.`` and search missed what ``kb show``
found.
"""

from __future__ import annotations

from typing import NamedTuple


class CallPathDef(NamedTuple):
    """One call-path prefix.

    ``namespace`` is how the scanner names it (``torch.ops.<namespace>`` for the
    dispatcher namespaces); ``binding`` is ``python`` for the torch_npu Python functions
    and ``dispatcher`` for ``torch.ops`` calls.  ``operator`` is False for a prefix no
    record's call path has but people type anyway (``torch.npu_rms_norm``): it is
    stripped for lookups and suggestions only.
    """

    prefix: str
    namespace: str
    binding: str
    operator: bool = True


CALL_PATHS: tuple[CallPathDef, ...] = (
    CallPathDef("torch_npu.atb.", "torch_npu.atb", "python"),
    CallPathDef("torch_npu.", "torch_npu", "python"),
    CallPathDef("torch.ops.npu.", "npu", "dispatcher"),
    CallPathDef("torch.npu.", "torch.npu", "python"),
    CallPathDef("torch.ops.atb.", "atb", "dispatcher"),
    CallPathDef("torch.", "torch", "python", operator=False),
)

#: The prefixes of records' call paths (``calls``), most specific first (a loop that
#: strips each in turn reads ``torch_npu.atb.x`` as ``x``, not ``atb.x``).
CALL_PREFIXES: tuple[str, ...] = tuple(c.prefix for c in CALL_PATHS if c.operator)
#: :data:`CALL_PREFIXES` plus the loose ``torch.`` people type; longest match first.
LOOSE_CALL_PREFIXES: tuple[str, ...] = tuple(c.prefix for c in CALL_PATHS)
#: Scanner namespace → the call path it spells (``atb`` → ``torch.ops.atb``).
NAMESPACE_PATHS: dict[str, str] = {c.namespace: c.prefix[:-1] for c in CALL_PATHS if c.operator}
#: Scanner namespaces bound as Python functions (the others go through the dispatcher).
PYTHON_NAMESPACES: frozenset[str] = frozenset(
    c.namespace for c in CALL_PATHS if c.operator and c.binding == "python"
)


def bare_operator(spelling: str, *, loose: bool = False) -> str:
    """``spelling`` without its first matching call-path prefix (``loose``: also ``torch.``)."""
    for prefix in LOOSE_CALL_PREFIXES if loose else CALL_PREFIXES:
        if spelling.startswith(prefix):
            return spelling[len(prefix) :]
    return spelling


def call_path(spelling: str) -> CallPathDef | None:
    """The operator call path ``spelling`` is written under (longest prefix), if any."""
    for c in CALL_PATHS:
        if c.operator and spelling.startswith(c.prefix):
            return c
    return None


def missing_call_path(spelling: str, calls: list[str]) -> list[str]:
    """The record's own call paths of the same binding when ``spelling`` is not one of them.

    ``torch_npu.npu_ring_mla`` against ``[torch_npu.atb.npu_ring_mla,
    torch.ops.atb.npu_ring_mla]`` gives ``[torch_npu.atb.npu_ring_mla]``: the Python
    function lives in another module.  Empty when the spelling is listed, has no operator
    prefix, or the record lists no path of that binding (nothing to compare against).
    """
    written = call_path(spelling)
    if written is None:
        return []
    name = spelling[len(written.prefix) :].split(".")[0]  # an overload is the same path
    if written.prefix + name in calls:
        return []
    return [c for c in calls if (p := call_path(c)) is not None and p.binding == written.binding]
