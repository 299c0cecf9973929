"""Graph modes: how the model's steps run — one row per mode.

A captured mode (aclgraph, torchair) records the steps once and replays them; an
operator record says per captured mode whether it can be captured
(``graph_mode.aclgraph`` …), so the captured modes are also field names of records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class GraphModeDef(NamedTuple):
    """One graph mode; ``captured`` when it records the steps for replay."""

    name: str
    captured: bool


GRAPH_MODE_ROWS: tuple[GraphModeDef, ...] = (
    GraphModeDef("eager", False),
    GraphModeDef("aclgraph", True),
    GraphModeDef("torchair", True),
)

GRAPH_MODES: tuple[str, ...] = tuple(m.name for m in GRAPH_MODE_ROWS)
#: The modes that capture a graph; each is a field of a record's ``graph_mode``.
CAPTURED_GRAPH_MODES: tuple[str, ...] = tuple(m.name for m in GRAPH_MODE_ROWS if m.captured)
if TYPE_CHECKING:
    GraphModeName = str
else:
    GraphModeName = Literal[GRAPH_MODES]
