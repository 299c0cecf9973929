"""Operator call paths: the prefixes under which a torch_npu operator is reachable.

``torch_npu.npu_rms_norm`` and ``torch.ops.npu.npu_rms_norm`` are one operator; the
ATB kernels live under ``torch.ops.atb``.  Every place that strips a call path to the
operator name, or spells an operator from its namespace, reads this table — a second
list once lacked ``torch.ops.atb.`` and search missed what ``kb show`` found.
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
    CallPathDef("torch_npu.", "torch_npu", "python"),
    CallPathDef("torch.ops.npu.", "npu", "dispatcher"),
    CallPathDef("torch.npu.", "torch.npu", "python"),
    CallPathDef("torch.ops.atb.", "atb", "dispatcher"),
    CallPathDef("torch.", "torch", "python", operator=False),
)

#: The prefixes of records' call paths (``calls``), most specific first.
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
