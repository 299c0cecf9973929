"""Turning the emulation on and off inside a process.

:func:`install` puts the emulated ``torch_npu`` (and its ``npu``, ``atb``, ``contrib``
submodules) in ``sys.modules``, defines ``torch.ops.npu``, sets ``torch.npu`` and the
``.npu()`` methods and makes ``device="npu"`` mean the CPU; :func:`uninstall` undoes
all of it and puts back whatever ``torch_npu`` was imported before (a real one, or
none).  Calls nest: the emulation ends when the last ``install`` is undone.  Nothing
here runs at import; a real torch_npu is never shadowed outside an explicit install.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from kb.emulate import state
from kb.emulate.errors import TorchMissing

#: the environment variable that sets the product calls are judged for
PRODUCT_ENV = "KB_EMULATE_PRODUCT"
TORCH_NPU_ENV = "KB_EMULATE_TORCH_NPU"
_MISSING = object()


class Emulation:
    """One active emulation: its runtime, what it changed, how to undo it."""

    def __init__(self, product: str | None, torch_npu: str | None) -> None:
        try:
            import torch
        except ImportError:
            raise TorchMissing() from None
        from kb.catalog.compiled import open_catalog
        from kb.emulate import device, library, module, trace
        from kb.emulate.runtime import Runtime

        trace.skip_dir(os.path.dirname(os.path.abspath(torch.__file__)))
        catalog = open_catalog()
        self.product = product
        self.torch_npu = torch_npu
        self.runtime = Runtime(catalog, product, torch_npu)
        self.registry = library.Registry()
        self.depth = 1
        self._saved: dict[str, Any] = {}
        try:
            for rec in catalog.records("operator"):
                self.registry.register(rec)
            npu = device.device_module()
            self.patches = device.Patches(npu)
            version = torch_npu or _latest_release()
            for name, mod in module.build(version, npu).items():
                self._saved[name] = sys.modules.get(name, _MISSING)
                sys.modules[name] = mod
        except BaseException:
            self._undo()
            raise

    @property
    def calls(self) -> list[Any]:
        """Every emulated call so far (:class:`kb.emulate.trace.Call`)."""
        return self.runtime.trace.calls

    def _undo(self) -> None:
        for name, old in self._saved.items():
            if old is _MISSING:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
        self._saved.clear()
        patches = getattr(self, "patches", None)
        if patches is not None:
            patches.undo()
        self.registry.destroy()

    def __enter__(self) -> Emulation:
        return self

    def __exit__(self, *exc: Any) -> None:
        uninstall()


def _latest_release() -> str:
    try:
        from kb.catalog.releases import load

        return str(load().latest)
    except (OSError, ValueError, KeyError):
        return "0.0.0"


def _product(value: str | None) -> str | None:
    from kb.vocab import PRODUCT_IDS, normalize

    if value is None or value == "":
        return None
    canon = normalize("product", value)
    if canon is None:
        raise ValueError(f"unknown product {value!r}; one of {', '.join(PRODUCT_IDS)}")
    return canon


def install(product: str | None = None, *, torch_npu: str | None = None) -> Emulation:
    """Turn the emulation on (or nest in the one that is on); usable as ``with install():``.

    ``product`` (else ``$KB_EMULATE_PRODUCT``) is the product calls are judged for, as
    ``kb check``'s ``target.product``; ``torch_npu`` (else ``$KB_EMULATE_TORCH_NPU``) the
    release, which also becomes ``torch_npu.__version__``.
    """
    product = _product(product if product is not None else os.environ.get(PRODUCT_ENV))
    torch_npu = torch_npu or os.environ.get(TORCH_NPU_ENV) or None
    on = state.ACTIVE
    if on is not None:
        if (product, torch_npu) not in ((on.product, on.torch_npu), (None, None)):
            raise RuntimeError(
                f"kb.emulate is already on for product {on.product!r}; "
                "uninstall it before asking for another target"
            )
        on.depth += 1
        return on  # type: ignore[no-any-return]
    state.ACTIVE = state.LAST = Emulation(product, torch_npu)
    return state.ACTIVE  # type: ignore[no-any-return]


def uninstall() -> None:
    """Undo one :func:`install`; the last one restores torch and ``sys.modules``."""
    on = state.ACTIVE
    if on is None:
        return
    on.depth -= 1
    if on.depth > 0:
        return
    state.ACTIVE = None
    on._undo()


def current() -> Emulation | None:
    """The emulation that is on, else the last one (its trace outlives it), else None."""
    return state.ACTIVE or state.LAST  # type: ignore[no-any-return]
