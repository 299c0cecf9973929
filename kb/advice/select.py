"""The one chain selector under ``kb advise`` and ``kb scan --plan``: it
lives in :mod:`kb.catalog.select` (it reads only records and vocabulary, so the planner
below this layer can call it); this is its name on the advice side."""

from __future__ import annotations

from kb.catalog.select import (  # noqa: F401
    ADVISE_FACTS,
    DECIDED_BY_RECORDS,
    RECORD_FACTS,
    TORCH,
    Catalog,
    Fit,
    Misfit,
    Selection,
    Situation,
    normalized,
    operators,
    practice_key,
    product_support,
    record_reasons,
    select,
    situations,
)
