"""How a model is deployed across devices: one row per parallel mode.

``kb advise moe`` asks ``--parallel tp|ep`` and ``kb scan`` plans for ``--parallel``
(default ``none``: one device, or replicas that do not talk inside a layer).  A chain
record says which communication domain it needs through its prerequisites: the ids a
row lists are the ones that set up that mode's process group.  Whether such a chain can
still run on a device that has no group is read from its operators: a fused stage taking
one of the row's ``group_args`` (an HCCL group name: MC2 dispatch/combine, matmul with
all-reduce) needs a real group; collectives written in plain torch (all-reduce,
all-gather, all-to-all over a group of one) leave the single-device computation.

Rows are in order of distance from one device: tensor parallelism only sums partial
results of the same stages, expert parallelism lays the stages out around moving
tokens between ranks.  A planner prefers the chain nearest the deployment asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class ParallelDef(NamedTuple):
    """One deployment mode.

    ``label`` says it in a few words for messages (``needs <label> (--parallel ep)``);
    ``prerequisites`` are the chain prerequisite ids that establish its communication
    domain; ``group_args`` the operator parameters that name such a group.
    """

    name: str
    label: str
    prerequisites: tuple[str, ...]
    group_args: tuple[str, ...]
    aliases: tuple[str, ...] = ()


PARALLEL_ROWS: tuple[ParallelDef, ...] = (
    ParallelDef("none", "a single device", (), (), ("single", "single-device", "dp")),
    ParallelDef(
        "tp", "tensor parallelism", ("tp-groups", "moe-tp-group"), ("hcom", "group_tp"), ("tensor",)
    ),
    ParallelDef("ep", "expert parallelism", ("ep-groups", "mc2-group"), ("group_ep",), ("expert",)),
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
PARALLEL_OF_PREREQUISITE: dict[str, str] = {
    p: row.name for row in PARALLEL_ROWS for p in row.prerequisites
}
#: Mode → how far its chains stray from the single-device computation (row order).
PARALLEL_DISTANCE: dict[str, int] = {row.name: i for i, row in enumerate(PARALLEL_ROWS)}
