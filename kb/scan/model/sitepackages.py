"""Base classes that live in an installed package (``class Mine(Phi3Model)`` with
``from transformers import Phi3Model``): the compute the subclass inherits is in that
package's source, so the reader follows the base there as it follows the scanned tree's
own imports.  The package is located with :func:`importlib.util.find_spec` on its
top-level name only, which searches the import path without running the package; its
files are then read through the same :class:`~kb.scan.model.resolve.Reach` (its limits,
and the server's root confinement, hold for them too).  Nothing is imported or run."""

from __future__ import annotations

import importlib.util
import os
import sys

#: top-level packages never read for a base: torch's layers are read by their documented
#: behaviour (kb.scan.model.ops), the others hold no module compute
_NEVER = frozenset(
    {
        "torch",
        "torchvision",
        "numpy",
        "einops",
        "flash_attn",
        "xformers",
        "triton",
        "apex",
        "typing_extensions",
    }
)
_FOUND: dict[str, str | None] = {}


def never_read(top: str) -> bool:
    """Whether top-level package ``top`` is read by its documented behaviour, never by its
    source, also where its source lies beside the scanned code (a virtual environment's
    site-packages holding torch next to the model's package)."""
    return top in _NEVER


def package_parent(top: str) -> str | None:
    """The directory holding installed top-level package (or module) ``top``, or None
    when it is not installed, not Python source, or never read (see ``_NEVER``)."""
    if top in _FOUND:
        return _FOUND[top]
    found: str | None = None
    if top.isidentifier() and top not in _NEVER and top not in sys.stdlib_module_names:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError, AttributeError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            where = next(iter(spec.submodule_search_locations), None)
            found = os.path.dirname(where) if where else None
        elif spec is not None and spec.origin and spec.origin.endswith(".py"):
            found = os.path.dirname(spec.origin)
    _FOUND[top] = found
    return found
