"""The query-independent prior of each record: one module for the CLI and the site.

The CLI's ranking multiplies text scores by these; the site build writes the same
numbers as each page's ``search.boost`` so the browser ranks with the same priors.
Whoosh-free on purpose: the site build and the name-only lookup import it cheaply.
"""

from __future__ import annotations

import math
from typing import Any

from kb.catalog.compiled import Catalog
from kb.vocab.statuses import OFFICIAL_STATUSES, STATUS_PRIOR

#: How much to trust a record as the answer before looking at the query: the
#: recommended, documented operator should lead its deprecated, superseded, private or
#: in-place relatives when the text matches them alike.  The weight per status is
#: kb.vocab's STATUS_PRIOR (each status's row holds it, beside its rank).
PRIVATE_PRIOR = 0.6  # _npu_* kernels (ATB): real, but not the public API to reach for
SUPERSEDED_PRIOR = 0.8
INPLACE_TWIN_PRIOR = 0.9
OFF_TOPIC_CATEGORY_PRIOR = 0.9  # training / vision: this KB is read for inference work


#: Operators that proven reference chains and decision trees use are the mainstream
#: answer; each use (up to PROVEN_CAP) lifts the record a little.
PROVEN_WEIGHT = 0.05
PROVEN_CAP = 2


#: Call sites found in shipping code (``seen_in``) show what engineers actually reach
#: for: up to SEEN_CAP_SITES sites (log-scaled) lift a record by up to SEEN_WEIGHT, so
#: the mainstream operator leads a one-model-family specialisation with the same words.
SEEN_WEIGHT = 0.6
SEEN_CAP_SITES = 32


def _seen_lift(rec: dict[str, Any]) -> float:
    sites = sum(len(s.get("sites") or []) for s in rec.get("seen_in") or [] if isinstance(s, dict))
    return 1.0 + SEEN_WEIGHT * math.log2(1 + min(sites, SEEN_CAP_SITES)) / math.log2(
        1 + SEEN_CAP_SITES
    )


def _uses(recs: dict[str, dict[str, Any]]) -> dict[str, int]:
    """How many chains and trees name each operator."""
    counts: dict[str, int] = {}
    for rec in recs.values():
        named: set[str] = set()
        if rec["kind"] == "chain":
            named = {st["operator"] for st in rec.get("stages", [])}
        elif rec["kind"] == "tree":
            named = {
                op
                for n in rec.get("nodes", [])
                for o in n["options"]
                for op in o.get("operators", [])
            }
        for op in named:
            counts[op] = counts.get(op, 0) + 1
    return counts


def priors(catalog: Catalog) -> dict[str, float]:
    """A query-independent weight per record (see STATUS_PRIOR and friends)."""
    recs = {r["name"]: r for r in catalog.records()}
    uses = _uses(recs)
    out: dict[str, float] = {}
    for name, rec in recs.items():
        if rec["kind"] != "operator":
            out[name] = 1.0
            continue
        prior = STATUS_PRIOR.get(rec.get("status", "stable"), 1.0)
        successor = recs.get(rec.get("superseded_by") or "")
        if successor is not None and successor.get("status") in OFFICIAL_STATUSES:
            prior *= SUPERSEDED_PRIOR
        if name.endswith("_") and name.rstrip("_") in recs:
            prior *= INPLACE_TWIN_PRIOR
        if name.startswith("_"):
            prior *= PRIVATE_PRIOR
        if rec.get("category") in ("training", "vision"):
            prior *= OFF_TOPIC_CATEGORY_PRIOR
        prior *= 1.0 + PROVEN_WEIGHT * min(uses.get(name, 0), PROVEN_CAP)
        prior *= _seen_lift(rec)
        out[name] = prior
    return out
