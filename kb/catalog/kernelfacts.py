"""Kernel-only support, read from a record's ``kernels`` blocks (plain dicts).

The products the kernels the operator's wrapper reaches are compiled for (see
:mod:`kb.catalog.models.kernel` for the blocks and ``scripts/harvest_kernels.py`` for
where they come from).  Works on plain record dicts and imports no model, so the
checker and ``kb show`` use it without loading pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kb.vocab.products import product_support


def kernel_products(record: Mapping[str, Any]) -> list[str]:
    """The products every kernel of the record is built for, when that says where it runs.

    Empty when the record has no kernel, when a wrapper branches on the SoC (it chooses
    per product) or when a registration is conditional on the build.  A statement the
    harvester could not read does not matter here: a literal ``AddConfig`` SoC is
    compiled whatever else the class does.  A product the wrapper refuses is left out.  With
    several kernels (a wrapper choosing among aclnn versions) only products all of them
    are built for count.
    """
    kernels = record.get("kernels") or []
    if not kernels:
        return []
    common: list[str] | None = None
    for k in kernels:
        if (k.get("wrapper") or {}).get("gated") or k.get("conditional"):
            return []
        refused = (k.get("wrapper") or {}).get("refused_products") or []
        have = [p for p in k.get("products") or [] if p not in refused]
        common = have if common is None else [p for p in common if p in have]
    return common or []


def kernel_only_products(record: Mapping[str, Any]) -> list[str]:
    """Products the kernels are built for and the page neither lists nor refuses, nor
    lists in part (a family whose page names some of its sub-series): kernel-only support."""
    page, refused = record.get("products") or [], record.get("unsupported_products") or []
    return [
        p for p in kernel_products(record) if product_support(p, page, refused) == "undocumented"
    ]
