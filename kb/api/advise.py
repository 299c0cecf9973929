"""``kb advise`` as functions: walk a decision tree with answers to chains and operators.

:func:`advise` is the one walk behind the command and the MCP tool: answers given,
asked for through ``ask``, the common case assumed, or - for a question that changes the
operator set - every completion ranked.  :func:`advise_step` is its MCP entry.
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
    """The decision tree ``name``: the one lookup ``kb tree`` uses (:func:`kb.api.tree.tree_record`)."""
    from kb.api.tree import tree_record as lookup

    return lookup(catalog, name)


def advise(
    catalog: Catalog,
    tree: Record,
    answers: Mapping[str, str],
    ask: Ask | None = None,
    strict: bool = False,
) -> dict[str, Any]:
    """The ``--format json`` document of ``kb advise`` and of the MCP tool.

    Unanswered questions go to ``ask`` when given.  Without it, a question that names
    its common case is assumed (listed under ``assumed``); the first one that does not
    ends the walk with every completion, ranked (``outcome: completions``).  ``strict``
    assumes nothing: a missing answer is a UsageError, as is an unusable one always.
    """
    from kb.advice.advise import AdviceError, MissingAnswer, advice, flags, walk
    from kb.advice.partial import completions, needed, summary
    from kb.advice.select import ADVISE_FACTS, select
    from kb.api.errors import UsageError

    # a fact every chain is held to through its records (--product on the attention
    # tree): the selector reads it, the walk asks only the tree's own questions
    asked = flags(tree)
    extra = {k: v for k, v in answers.items() if k in ADVISE_FACTS and k not in asked}
    answers = {k: v for k, v in answers.items() if k not in extra}
    _check_facts(extra)
    try:
        walked = walk(tree, answers, ask=ask, assume=not strict)
    except MissingAnswer as stop:
        if strict:
            raise UsageError(str(stop)) from None
        try:
            found, total = completions(tree, answers)
        except AdviceError as exc:
            raise UsageError(str(exc)) from None
        steps = stop.steps
        return {
            "tree": tree["name"],
            "complete": False,
            "outcome": "completions",
            "answers": {f"--{s.key}": s.value for s in steps},
            "assumed": [
                {"flag": f"--{s.key}", "answer": s.value, "label": s.label}
                for s in steps
                if s.assumed
            ],
            "path": [s.as_dict() for s in steps],
            "needed": [needed(stop)],
            "completions": [
                summary(
                    k,
                    c,
                    select(
                        catalog,
                        {**extra, **answers, **{s.key: s.value for s in c.walked.steps}},
                        tree=tree["name"],
                    ),
                )
                for k, c in enumerate(found, 1)
            ],
            "facts": {f"--{k}": v for k, v in {**extra, **answers}.items()},
            "not_fitting": [],
            "completions_total": total,
            "verdict": "",
            "ignored": [],
            "chains": [],
            "alternatives": [],
            "prerequisites": [],
            "operators": {},
            "notes": [],
        }
    except AdviceError as exc:
        raise UsageError(str(exc)) from None
    facts = {**extra, **answers, **{s.key: s.value for s in walked.steps}}
    chosen = select(catalog, facts, tree=tree["name"])
    return {
        **advice(walked, catalog.get, chosen),
        "facts": chosen.as_dict()["facts"],
        "complete": True,
        "needed": [],
        "completions": [],
        "completions_total": 0,
    }


def advise_step(
    catalog: Catalog, tree: str, answers: Mapping[str, str | int], strict: bool = False
) -> dict[str, Any]:
    """The MCP tool: the same document as ``kb advise TREE ... --no-input [--strict]
    --format json``, answers keyed with or without the leading ``--``."""
    given = {k.removeprefix("--"): str(v) for k, v in answers.items()}
    return advise(catalog, tree_record(catalog, tree), given, strict=strict)


def _check_facts(extra: Mapping[str, str]) -> None:
    """A product or deployment no vocabulary knows is a usage error, never a silent misfit."""
    from kb.api.errors import UsageError
    from kb.vocab import PRODUCT_IDS, normalize
    from kb.vocab.parallel import PARALLEL_ALIASES, PARALLEL_MODES

    product = extra.get("product")
    if product is not None and normalize("product", product) is None:
        raise UsageError(
            f"--product {product!r} is not a product; use one of: {', '.join(PRODUCT_IDS)}"
        )
    mode = extra.get("parallel")
    if (
        mode is not None
        and mode.lower() not in PARALLEL_MODES
        and mode.lower() not in PARALLEL_ALIASES
    ):
        raise UsageError(f"--parallel {mode!r}: use one of {', '.join(PARALLEL_MODES)}")
