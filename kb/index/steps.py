"""Fused-step matching: a query that names computation steps finds the operator that
fuses exactly those.

"residual add then rmsnorm in one kernel" names the steps ``residual_add`` and
``rms_norm`` (kb.vocab's Step table).  Every operator record lists the steps it fuses
(``fuses:``); the best answer fuses every named step and little else, so
``npu_add_rms_norm`` (those two steps) leads ``npu_moe_distribute_combine_add_rms_norm``
(those two and five more), and ``rmsnorm`` alone finds ``npu_rms_norm`` before its
specialisations.  Whoosh-free: the text ranking and the site build both read it.
"""

from __future__ import annotations

import functools
from typing import get_args

from kb.index.textanalysis import tokens
from kb.vocab.taxonomy import Step

#: What an unnamed extra step costs against a named one it matches.
EXTRA_STEP_COST = 0.2
#: A task phrase names at least two steps; one step ("flash attention") is a topic,
#: and a record's fuses list its inner steps too, so extras would punish the main op.
MIN_NAMED = 2
#: How much a record whose fused steps answer the query gains, at full match.
STEP_WEIGHT = 1.5


@functools.lru_cache(maxsize=1)
def _step_words() -> tuple[tuple[str, frozenset[str], str], ...]:
    """Each step with the query tokens that name it and its joined spelling (rmsnorm)."""
    out = []
    for step in get_args(Step):
        parts = step.split("_")
        words = frozenset(t for p in parts for t in tokens(p))
        out.append((step, words, "".join(parts) if len(parts) > 1 else ""))
    return tuple(out)


def step_parts() -> list[str]:
    """The words of the step vocabulary, as written (no stemming)."""
    return sorted({p for step in get_args(Step) for p in step.split("_")})


def named_steps(query_tokens: set[str]) -> frozenset[str]:
    """The steps a query names; a step inside a longer named one (add in residual add)
    is that one's, not a second step."""
    found: dict[str, frozenset[str]] = {}
    for step, words, joined in _step_words():
        if (words and words <= query_tokens) or (joined and joined in query_tokens):
            found[step] = words
    return frozenset(
        s for s, w in found.items() if not any(w < other for o, other in found.items() if o != s)
    )


@functools.lru_cache(maxsize=4096)
def _does(step: str, fused: str) -> bool:
    """A fused step does a named one: the same step, or one whose words hold all of the
    named step's ("attention" is done by flash_attention, "quantize" by dynamic_quantize)."""
    if step == fused:
        return True
    words = _words()
    own = words.get(step, frozenset())
    return bool(own) and own <= words.get(fused, frozenset())


@functools.lru_cache(maxsize=1)
def _words() -> dict[str, frozenset[str]]:
    return {step: words for step, words, _ in _step_words()}


def step_factor(fuses: frozenset[str] | set[str], named: frozenset[str]) -> float:
    """1 plus how well a record's fused steps answer the named steps (fewest extras best)."""
    if len(named) < MIN_NAMED or not fuses:
        return 1.0
    matched = sum(1 for step in named if any(_does(step, f) for f in fuses))
    if not matched:
        return 1.0
    extras = sum(1 for f in fuses if not any(_does(step, f) for step in named))
    fit = (matched - EXTRA_STEP_COST * extras) / len(named)
    return 1.0 + STEP_WEIGHT * max(fit, 0.0)


#: A record named for a step the query does not ask about is a specialisation
#: ("flash attention" → npu_sparse_flash_attention is named for sparse_attention;
#: "rms norm" → npu_add_rms_norm for residual_add): it falls behind the basic operator.
UNASKED_NAMED_STEP_PRIOR = 0.85


def name_spelled(name_stems: frozenset[str], fuses: frozenset[str]) -> frozenset[str]:
    """The fused steps whose words the record's name shares: the only ones
    :func:`unasked_named_steps` can count, whatever the query."""
    words = _words()
    return frozenset(step for step in fuses if words.get(step, frozenset()) & name_stems)


def unasked_named_steps(
    name_stems: frozenset[str], fuses: frozenset[str], query_tokens: set[str], named: frozenset[str]
) -> int:
    """How many steps a record fuses that its name spells and the query does not ask
    for (a step the query names, "rmsnorm" for rms_norm included, is asked)."""
    words = _words()
    count = 0
    for step in fuses:
        own = words.get(step, frozenset())
        if own <= query_tokens or any(_does(asked, step) for asked in named):
            continue
        if (own - query_tokens) & name_stems:
            count += 1
    return count
