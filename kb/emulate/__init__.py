"""torch_npu on the CPU: run a port before there is a device.

``kb.emulate`` stands in for torch_npu on real PyTorch: every operator with a numpy
reference runs as ``torch_npu.<op>``, ``torch.ops.npu.<op>`` (with its overloads) and
``torch_npu.atb.<op>`` on torch tensors, computing exactly what :func:`kb.reference.run`
computes; each call is judged by the operator's record with ``kb check``'s rules and
traced with its call site; ``.npu()``, ``device="npu"``, ``torch.npu`` streams and
events and ``npu_format_cast`` are CPU no-ops or identities.  Ways in::

    kb emulate -- python my_port.py        # or: python -m kb.emulate my_port.py
    with kb.emulate.install(product="atlas-a2"):
        import torch_npu
        ...
    def test_port(npu_emulator): ...       # the pytest fixture

Importing this package imports no torch; :func:`install` does (the ``[emulate]``
extra).  :func:`compare` runs an original and a ported module on the same inputs and
reports, per submodule, the error against the dtype's tolerance.

Stable entry points (``kb verify`` and other tools build on these; keep them):

- here: :func:`install` / :func:`uninstall` (nesting; ``install`` returns the
  :class:`kb.emulate.session.Emulation`, a context manager with ``.calls``),
  :func:`calls`, :func:`compare` (-> :class:`kb.emulate.comparison.Comparison`:
  ``passed``, ``first_failure``, ``message()``, ``as_dict()``), :func:`emulated`,
  :func:`emulated_names`, and the errors ``NotEmulated``, ``BackwardNotEmulated``,
  ``CallRejected``, ``EmulatorWarning``, ``TorchMissing`` (a reference's own limit is
  ``kb.reference.NotModelled``, its refusal of bad input ``ReferenceInputError``);
- :mod:`kb.emulate.comparison`: ``diff(name, original, port, tolerance)`` (one
  module's worst element as a ``ModuleDiff``) and ``TOLERANCE`` (rtol, atol per dtype);
- :mod:`kb.emulate.session`: ``install``, ``uninstall``, ``current``;
- :mod:`kb.emulate.run`: ``command(argv, product)`` and ``script(path, args, product)``
  (what ``kb emulate`` and ``python -m kb.emulate`` run);
- :mod:`kb.emulate.examples`: ``run(record, index)`` (a record example at its ``small``
  size) and ``shrink``;
- :mod:`kb.emulate.names`: ``how``, ``in_words`` (what ``kb show`` says; no torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kb.emulate.errors import (
    BackwardNotEmulated,
    CallRejected,
    EmulatorWarning,
    NotEmulated,
    TorchMissing,
)
from kb.emulate.names import emulated, emulated_names

if TYPE_CHECKING:
    from kb.emulate.session import Emulation

__all__ = [
    "BackwardNotEmulated",
    "CallRejected",
    "EmulatorWarning",
    "NotEmulated",
    "TorchMissing",
    "calls",
    "compare",
    "emulated",
    "emulated_names",
    "install",
    "uninstall",
]


def install(product: str | None = None, *, torch_npu: str | None = None) -> Emulation:
    """Turn the emulation on in this process (see :func:`kb.emulate.session.install`)."""
    from kb.emulate.session import install as _install

    return _install(product, torch_npu=torch_npu)


def uninstall() -> None:
    """Undo one :func:`install`."""
    from kb.emulate.session import uninstall as _uninstall

    _uninstall()


def calls() -> list[Any]:
    """The calls of the current (or last) emulation, oldest first."""
    from kb.emulate.session import current

    em = current()
    return list(em.calls) if em is not None else []


def compare(*args: Any, **kwargs: Any) -> Any:
    """Original vs port on the same inputs (see :func:`kb.emulate.comparison.compare`)."""
    from kb.emulate.comparison import compare as _compare

    return _compare(*args, **kwargs)
