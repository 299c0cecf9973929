"""``kb advise`` as functions: walk a decision tree with answers to chains and operators.

:func:`advise` is the command's walk (every answer given, or asked for through ``ask``);
:func:`advise_step` is the conversational one the MCP tool offers: with an answer still
missing it returns the next question instead of failing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.catalog.compiled import Catalog

Record = dict[str, Any]
#: Asked for a missing answer: the node and the steps so far; returns the answer.
Ask = Callable[[Record, list[Any]], str]


def tree_record(catalog: Catalog, name: str) -> Record:
    """The decision tree ``name``; UsageError (with a did-you-mean) for anything else."""
    from kb.api.errors import NotFound, UsageError
    from kb.api.tree import tree_hint

    trees = catalog.names("tree")
    rec = catalog.get(name)
    if rec is None:
        raise NotFound(f"no decision tree named {name!r}{tree_hint(name, trees)}; "
                         f"trees: {', '.join(trees)}")  # fmt: skip
    if rec["kind"] != "tree":
        raise UsageError(f"{rec['name']!r} is a {rec['kind']}, not a decision tree; trees: "
                         f"{', '.join(trees)}")  # fmt: skip
    return rec  # type: ignore[no-any-return]


def advise(catalog: Catalog, tree: Record, answers: Mapping[str, str],
           ask: Ask | None = None) -> dict[str, Any]:  # fmt: skip
    """The ``--format json`` document of a complete walk; UsageError for a missing or
    unusable answer (after ``ask``, when given, had its chance)."""
    from kb.advice.advise import AdviceError, advice, walk
    from kb.api.errors import UsageError

    try:
        walked = walk(tree, answers, ask=ask)
    except AdviceError as exc:
        raise UsageError(str(exc)) from None
    return advice(walked, catalog.get)


class _Needed(Exception):
    def __init__(self, node: Record, steps: list[Any]) -> None:
        self.node, self.steps = node, steps


def _stop(node: Record, steps: list[Any]) -> str:
    raise _Needed(node, list(steps))


def advise_step(catalog: Catalog, tree: str, answers: Mapping[str, str | int]) -> dict[str, Any]:
    """The walk so far: the advice plus ``complete: true`` when every answer on the path
    is known, else ``complete: false`` with the path and the next question (``needed``)."""
    from kb.advice.advise import AdviceError, advice, walk
    from kb.api.errors import NotFound, UsageError

    rec = catalog.get(tree)
    if rec is None or rec["kind"] != "tree":
        raise NotFound(f"no decision tree named {tree!r}; trees: "
                         f"{', '.join(catalog.names('tree'))}")  # fmt: skip
    given = {k.removeprefix("--"): str(v) for k, v in answers.items()}
    try:
        walked = walk(rec, given, ask=_stop)
    except _Needed as stop:
        node = stop.node
        return {
            "tree": rec["name"],
            "complete": False,
            "answers": {f"--{s.key}": s.value for s in stop.steps},
            "path": [s.as_dict() for s in stop.steps],
            "needed": [{"flag": f"--{node['key']}", "key": node["key"],
                        "question": node["question"]["en"],
                        "options": [{"value": o["value"], "label": o["label"]}
                                    for o in node["options"]]}],
        }
    except AdviceError as exc:
        raise UsageError(str(exc)) from None
    return {**advice(walked, catalog.get), "complete": True, "needed": []}
