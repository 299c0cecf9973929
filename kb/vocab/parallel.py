"""How a model is deployed across devices: one row per parallel mode.

``kb advise moe`` asks ``--parallel tp|ep`` and ``kb scan`` plans for ``--parallel``
(default ``none``: one device, or replicas that do not talk inside a layer).  A chain
record says which communication domain it needs through its prerequisites: the ids a
row lists are the ones that set up that mode's process group.  ``drops_out`` tells
whether a chain written for the mode is still the single-device computation on one
rank (a tensor-parallel all-reduce of partial sums is the identity over a group of one)
or is laid out around moving tokens between ranks (expert-parallel dispatch, all-to-all
splits, MC2 operators that need an HCCL group), which one device does not run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class ParallelDef(NamedTuple):
    """One deployment mode.

    ``label`` says it in a few words for messages (``needs <label> (--parallel ep)``);
    ``prerequisites`` are the chain prerequisite ids that establish its communication
    domain; ``drops_out``: on one device a chain of this mode runs as written with the
    collective removed.
    """

    name: str
    label: str
    prerequisites: tuple[str, ...]
    drops_out: bool
    aliases: tuple[str, ...] = ()


PARALLEL_ROWS: tuple[ParallelDef, ...] = (
    ParallelDef("none", "a single device", (), True, ("single", "single-device", "dp")),
    ParallelDef("tp", "tensor parallelism", ("tp-groups", "moe-tp-group"), True, ("tensor",)),
    ParallelDef("ep", "expert parallelism", ("ep-groups", "mc2-group"), False, ("expert",)),
)

PARALLEL_MODES: tuple[str, ...] = tuple(row.name for row in PARALLEL_ROWS)
if TYPE_CHECKING:
    ParallelMode = str
else:
    ParallelMode = Literal[PARALLEL_MODES]

#: The mode a plan assumes when nobody says.
DEFAULT_PARALLEL = PARALLEL_ROWS[0].name
PARALLEL_BY_NAME: dict[str, ParallelDef] = {row.name: row for row in PARALLEL_ROWS}
PARALLEL_ALIASES: dict[str, str] = {a: row.name for row in PARALLEL_ROWS for a in row.aliases}
#: Chain prerequisite id → the mode whose communication domain it sets up.
PARALLEL_OF_PREREQUISITE: dict[str, str] = {p: row.name for row in PARALLEL_ROWS for p in row.prerequisites}
