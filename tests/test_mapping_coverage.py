"""Every mapping id the planner can put on a stage is in the mapping table with a passing
numpy proof, or is named in UNPROVEN below.

The ids come from :mod:`kb.scan.model.mapping_ids` (the planner and the inventory use no
other), attention ids from its families and the layouts the chain records give their
attention stages.  UNPROVEN must shrink: the test fails when a listed id gets proven (take
it off the list) and when an id the planner can emit is neither proven nor listed.
"""

from __future__ import annotations

import pytest

from kb.scan.model import mapping_ids as ids

pytest.importorskip("numpy", reason="the [reference] extra is not installed")
pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference.mappings import BY_ID
from kb.reference.proofs import verify

#: ids the planner can emit that have no passing proof yet (issue 22, item 3); since the
#: planner tags stages with rows of the pattern table only (issue 29), none
UNPROVEN: frozenset[str] = frozenset()


def emitted() -> set[str]:
    """The ids a plan stage can carry: a stage is tagged with the row of the pattern table
    it stands for (kb/scan/model/rows.py), so the ids are the rows that match modules."""
    return set(ids.PLANNED)


def _proven(mapping_id: str) -> bool:
    return mapping_id in BY_ID and verify(mapping_id) == []


def test_the_planner_ids_are_distinct_and_named_once() -> None:
    assert len(ids.PLANNED) == len(set(ids.PLANNED))
    assert not set(ids.FALLBACKS) & set(ids.PLANNED)
    assert set(ids.ROUTERS) <= set(ids.PLANNED)


def test_every_planned_id_is_proven_or_listed_unproven() -> None:
    ids_now = emitted()
    unproven = {i for i in ids_now if not _proven(i)}
    new = sorted(unproven - UNPROVEN)
    assert not new, (
        f"the planner can emit ids without a passing proof, not listed in UNPROVEN: {new}"
    )
    proven_now = sorted(UNPROVEN - unproven)
    assert not proven_now, (
        f"proven now (or no longer emitted): take them off UNPROVEN: {proven_now}"
    )


def test_a_listed_id_is_one_the_planner_can_emit() -> None:
    assert emitted() >= UNPROVEN
