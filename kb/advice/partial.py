"""Partial answers: the common case assumed, and every completion of what is left open.

A question whose "nothing special" answer is what most layers do (no sinks, no cached
prefix, no extra streams, no norm fusion, SwiGLU) names that answer as its node's
``assume``; ``kb advise --no-input`` takes it and says so.  A question without one
changes the operator set, so nothing is guessed: the walk branches on every option and
returns each completion (the answers it adds and the chains it reaches).  Completions
are ranked by the tree's option order - trees list the most common answer first - so
the first completion is the likeliest, and fewer added answers rank earlier on ties.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kb.advice.advise import MissingAnswer, Record, Walk, walk

if TYPE_CHECKING:
    from kb.advice.select import Selection

#: Completions returned at most; a tree with more says how many were left off.
LIMIT = 60


@dataclass(frozen=True)
class Completion:
    """One way to finish the walk: the answers it adds (in order asked) and the walk."""

    order: tuple[int, ...]
    added: tuple[tuple[str, str], ...]
    walked: Walk


def needed(missing: MissingAnswer) -> dict[str, Any]:
    """The question a walk stopped at, as the advice document lists it."""
    node = missing.node
    return {
        "flag": f"--{node['key']}",
        "key": node["key"],
        "question": node["question"]["en"],
        "options": [{"value": o["value"], "label": o["label"]} for o in node["options"]],
    }


def completions(tree: Record, answers: Mapping[str, str]) -> tuple[list[Completion], int]:
    """Every completion of ``answers`` (common cases assumed), ranked; and how many there are."""
    found: list[Completion] = []
    todo: list[tuple[tuple[int, ...], tuple[tuple[str, str], ...]]] = [((), ())]
    total = 0
    while todo:
        order, added = todo.pop()
        given = {**answers, **dict(added)}
        try:
            walked = walk(tree, given, assume=True)
        except MissingAnswer as stop:
            key = stop.node["key"]
            if key in given:  # the same flag asked twice on one path: no completion
                continue
            for i, opt in enumerate(stop.node["options"]):
                todo.append((order + (i,), added + ((key, opt["value"]),)))
            continue
        total += 1
        found.append(Completion(order, added, walked))
    found.sort(key=lambda c: (c.order, len(c.added)))
    return found[:LIMIT], total


def summary(rank: int, done: Completion, selection: Selection | None = None) -> dict[str, Any]:
    """A completion for the advice document: what it adds, assumes, and reaches (with a
    selection, each question's chains are the selector's fits there, best first)."""
    walked = done.walked
    last = walked.steps[-1] if walked.steps else None
    reached: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for s in [] if walked.stop else walked.steps:
        if selection is None:
            if s.chain:
                reached.append({"name": s.chain, "alternatives": [c for c, _ in s.alternatives]})
            continue
        if not (s.chain or s.alternatives):
            continue
        fits, misfits = selection.at(s.node)
        if fits:
            reached.append({"name": fits[0].chain, "alternatives": [f.chain for f in fits[1:]]})
        refused += [m.as_dict() for m in misfits if not m.conflicts]
    return {
        "rank": rank,
        "adds": {f"--{k}": v for k, v in done.added},
        "assumed": {f"--{s.key}": s.value for s in walked.assumed},
        "answers": {f"--{s.key}": s.value for s in walked.steps},
        "labels": [
            f"--{s.key} {s.value}: {s.label}" for s in walked.steps if s.key in dict(done.added)
        ],
        "outcome": "stop" if walked.stop or (refused and not reached) else "advice",
        "verdict": last.note if walked.stop and last else "",
        "chains": reached,
        "not_fitting": refused,
        "operators": walked.operators(),
    }
