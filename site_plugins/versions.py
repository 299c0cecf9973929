"""torch_npu release facts for readers: ranges with gaps, and what changed when.

A cell per release line misleads (a late backport to 2.1 followed by nothing until 2.6
reads as a removal), so pages show the runs the compiled ``versions.ranges`` field
holds: ``2.1.0.post17, 2.6.0.post3+``.
"""

from __future__ import annotations

import itertools

from kb.catalog.releases import format_ranges, release_key, schema_diff
from site_plugins.common import Record


def ranges(op: Record) -> list[tuple[str, str | None]]:
    """Runs of releases that ship the operator; from first/last when no list is known."""
    v = op.get("versions") or {}
    if v.get("ranges"):
        return [(str(a), None if b is None else str(b)) for a, b in v["ranges"]]
    if v.get("first"):
        return [(v["first"], v.get("last"))]
    return []


def ranges_text(op: Record) -> str:
    """``2.1.0.post17, 2.6.0.post3+``; empty when the record states no release."""
    return format_ranges(ranges(op))


def first(op: Record) -> str | None:
    got = ranges(op)
    return got[0][0] if got else None


def changes(op: Record) -> list[tuple[str, list[str]]]:
    """``(release, what changed)`` for every schema change after the first release.

    Release lines are maintained in parallel, so the list follows release order, and a
    change can be undone on an older line's later release; each entry is the diff from
    the schema in force just before it.
    """
    items = sorted(
        (op.get("versions") or {}).get("changes") or [],
        key=lambda c: release_key(c["release"]) or (0, 0, 0, 0, 0, 0),
    )
    out = []
    for before, after in itertools.pairwise(items):
        out.append((after["release"], schema_diff(before["schema"], after["schema"])))
    return out
