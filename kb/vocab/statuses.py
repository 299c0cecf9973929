"""Operator statuses: one row per status, in one rank order.

The order is how well documented and how safe to recommend an operator is: stable
(official page), beta (official beta page), undocumented (schema known, no page),
deprecated (the page tells you to stop using it).  Every ranking — KB103's "no
successor that stands lower", the scanner's choice between operators, search's prior —
reads it from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class StatusDef(NamedTuple):
    """One status: its rank (higher stands higher), search prior, and what it means.

    ``official`` marks statuses an official reference page documents; ``search_prior``
    is how much search trusts such a record as the answer before reading the query.
    """

    name: str
    rank: int
    official: bool
    search_prior: float
    meaning: str


STATUS_ROWS: tuple[StatusDef, ...] = (
    StatusDef("stable", 3, True, 1.0, "documented on an official reference page"),
    StatusDef(
        "beta",
        2,
        True,
        0.9,
        "documented on an official beta reference page; the interface may still change",
    ),
    StatusDef("deprecated", 0, False, 0.6, "kept for old code; the page names what to use instead"),
    StatusDef(
        "undocumented",
        1,
        False,
        0.75,
        "the schema is known but there is no official reference page",
    ),
)

STATUSES: tuple[str, ...] = tuple(s.name for s in STATUS_ROWS)
if TYPE_CHECKING:
    Status = str
else:
    Status = Literal[STATUSES]

#: Status → rank; higher stands higher (stable 3, beta 2, undocumented 1, deprecated 0).
STATUS_RANK: dict[str, int] = {s.name: s.rank for s in STATUS_ROWS}
#: Statuses an official reference page documents.
OFFICIAL_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUS_ROWS if s.official)
STATUS_PRIOR: dict[str, float] = {s.name: s.search_prior for s in STATUS_ROWS}
STATUS_MEANINGS: dict[str, str] = {s.name: s.meaning for s in STATUS_ROWS}
